package attend

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

func TestPermissionAnswer(t *testing.T) {
	// The reference runtime's choices, with a signature grant.
	ref := &protocol.PermissionRequest{RequestID: "p1", Options: []string{"allow", "allow_always", "deny"}, Choices: []protocol.PermissionChoice{
		{ID: "allow", Intent: "allow"}, {ID: "allow_always", Intent: "persist"},
		{ID: "allow_signature", Intent: "persist"}, {ID: "deny", Intent: "deny"}}}
	// A third-party agent's own choices (ids of its own).
	acp := &protocol.PermissionRequest{RequestID: "p2", Choices: []protocol.PermissionChoice{
		{ID: "opt-yes", Intent: "allow"}, {ID: "opt-no", Intent: "deny"}}}
	// The legacy form: options only, without allow_always.
	legacy := &protocol.PermissionRequest{RequestID: "p3", Options: []string{"allow", "deny"}}
	tests := []struct {
		req              *protocol.PermissionRequest
		option           string
		choice, decision string
		bad              bool
	}{
		{ref, protocol.OptionAllowOnce, "allow", "", false},
		{ref, protocol.OptionAlwaysAllow, "allow_always", "", false},
		{ref, protocol.OptionDeny, "deny", "", false},
		{ref, "allow_signature", "allow_signature", "", false},
		{ref, "deny", "deny", "", false},
		{ref, "Maybe", "", "", true},
		{acp, protocol.OptionAllowOnce, "opt-yes", "", false},
		{acp, protocol.OptionDeny, "opt-no", "", false},
		{acp, protocol.OptionAlwaysAllow, "", "", true},
		{legacy, protocol.OptionAllowOnce, "", "allow", false},
		{legacy, protocol.OptionDeny, "", "deny", false},
		{legacy, protocol.OptionAlwaysAllow, "", "", true},
		{legacy, "opt-yes", "", "", true},
	}
	for _, tt := range tests {
		choice, decision, err := permissionAnswer(tt.req, tt.option)
		if tt.bad {
			if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
				t.Errorf("%s %q: err = %v, want INVALID_REQUEST", tt.req.RequestID, tt.option, err)
			}
			continue
		}
		if err != nil || choice != tt.choice || decision != tt.decision {
			t.Errorf("%s %q = %q, %q, %v; want %q, %q", tt.req.RequestID, tt.option, choice, decision, err, tt.choice, tt.decision)
		}
	}
	if got := permissionOptions(legacy); !reflect.DeepEqual(got, []string{protocol.OptionAllowOnce, protocol.OptionDeny}) {
		t.Errorf("legacy options = %q", got)
	}
}

func TestQuestionValue(t *testing.T) {
	sel := Request{RequestID: "u1", UIKind: protocol.UISelect, Options: []string{"red", "green"}}
	multi := Request{RequestID: "u2", UIKind: protocol.UISelect, Options: []string{"a", "b"}, Multiple: true}
	conf := Request{RequestID: "u3", UIKind: protocol.UIConfirm, Options: []string{"yes", "no"}}
	input := Request{RequestID: "u4", UIKind: protocol.UIInput}
	tests := []struct {
		req   Request
		value any
		want  any
		bad   bool
	}{
		{sel, "green", "green", false},
		{sel, []string{"red"}, "red", false},
		{sel, "blue", nil, true},
		{sel, []string{"red", "green"}, nil, true},
		{sel, 3, nil, true},
		{sel, nil, nil, false},
		{multi, []string{"a", "b"}, []string{"a", "b"}, false},
		{multi, "b", []string{"b"}, false},
		{multi, []string(nil), []string{}, false},
		{multi, []string{"c"}, nil, true},
		{conf, "Y", "yes", false},
		{conf, "false", "no", false},
		{conf, true, "yes", false},
		{conf, "maybe", nil, true},
		{input, "some text", "some text", false},
		{input, []string{"x"}, nil, true},
	}
	for _, tt := range tests {
		got, err := questionValue(tt.req, tt.value)
		if tt.bad {
			if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
				t.Errorf("%s %#v: err = %v, want INVALID_REQUEST", tt.req.RequestID, tt.value, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %#v = %#v, %v; want %#v", tt.req.RequestID, tt.value, got, err, tt.want)
		}
	}
}

func TestResolvedAndMine(t *testing.T) {
	req := Request{AgentID: "agent-1", RequestID: "p1", Kind: KindPermission, Choices: []protocol.PermissionChoice{
		{ID: "allow", Intent: "allow"}, {ID: "allow_signature", Intent: "persist"}, {ID: "deny", Intent: "deny"}}}
	bySig := resolvedPermission(req, &protocol.PermissionResolved{RequestID: "p1", ChoiceID: "allow_signature", Source: "unix"})
	if bySig.Option != protocol.OptionAlwaysAllow {
		t.Errorf("signature choice option = %q", bySig.Option)
	}
	if !mine(&sentAnswer{choiceID: "allow_signature"}, bySig) || mine(&sentAnswer{choiceID: "allow"}, bySig) || mine(nil, bySig) {
		t.Error("mine by choice_id is wrong")
	}
	headless := resolvedPermission(req, &protocol.PermissionResolved{RequestID: "p1", Decision: "deny", Source: "headless"})
	if headless.Option != protocol.OptionDeny || mine(&sentAnswer{decision: "deny"}, headless) {
		t.Errorf("headless deny = %+v, counted mine: %v", headless, mine(&sentAnswer{decision: "deny"}, headless))
	}
	q := Request{AgentID: "agent-1", RequestID: "u1", Kind: KindQuestion}
	list := resolvedQuestion(q, &protocol.UIResolved{RequestID: "u1", Value: []byte(`["a","b"]`), Source: "websocket"})
	if !reflect.DeepEqual(list.Value, []string{"a", "b"}) || list.Option != "" || !mine(&sentAnswer{value: []string{"a", "b"}}, list) {
		t.Errorf("list answer = %+v", list)
	}
	dismissed := resolvedQuestion(q, &protocol.UIResolved{RequestID: "u1", Value: []byte(`null`), Source: "unix"})
	if dismissed.Value != nil || !mine(&sentAnswer{}, dismissed) || mine(&sentAnswer{value: "x"}, dismissed) {
		t.Errorf("dismissal = %+v", dismissed)
	}
}

func TestWatchNeedsOptions(t *testing.T) {
	if _, err := Watch(context.Background(), Options{AgentID: "agent-1"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Watch without Dial and Events: %v", err)
	}
}

// TestEventsPanicStopsTheWatcher: a panic in the caller's callback stops
// the Watcher with the panic as its error, instead of the process.
func TestEventsPanicStopsTheWatcher(t *testing.T) {
	stopped := make(chan Stopped, 1)
	w, err := Watch(context.Background(), Options{
		AgentID: "agent-1",
		Dial: func(context.Context) (*client.Conn, error) {
			return nil, errors.New("no daemon here")
		},
		Events: func(ev Event) {
			switch e := ev.(type) {
			case Detached:
				panic("the caller's bug")
			case Stopped:
				stopped <- e
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s := <-stopped
	if s.Err == nil || !strings.Contains(s.Err.Error(), "the caller's bug") {
		t.Fatalf("stopped with %v", s.Err)
	}
	<-w.Done()
	if !errors.Is(w.Err(), s.Err) {
		t.Fatalf("Err = %v", w.Err())
	}
}

// FuzzDecodeValue: whatever a ui_resolved carries, its value reads as nil,
// a string or a list of strings, and a string or a list reads back the
// same once encoded again.
func FuzzDecodeValue(f *testing.F) {
	for _, seed := range []string{`"yes"`, `["a","b"]`, `[]`, `null`, ``, ` null `, `true`, `{"a":1}`, `[1,2]`, `"\u00e9"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v := decodeValue(raw)
		switch v := v.(type) {
		case nil:
		case string, []string:
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if again := decodeValue(b); !reflect.DeepEqual(again, v) {
				t.Fatalf("%q read %#v, encoded %s, read back %#v", raw, v, b, again)
			}
		default:
			t.Fatalf("%q read as %T", raw, v)
		}
	})
}
