package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// TestDecodeClientRejects drives every way a client frame can be invalid
// and checks the code, the field at fault and the id kept for the reply.
func TestDecodeClientRejects(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		code  Code
		field string
		id    string
	}{
		{"empty", ``, CodeBadJSON, "", ""},
		{"syntax", `{"v":1,`, CodeBadJSON, "", ""},
		{"array", `[{"v":1,"type":"hello"}]`, CodeBadJSON, "", ""},
		{"string", `"hello"`, CodeBadJSON, "", ""},
		{"null", `null`, CodeBadJSON, "", ""},
		{"trailing garbage", `{"v":1,"type":"repo.add","path":"/x"}x`, CodeBadJSON, "", ""},
		{"two objects", `{"v":1,"type":"repo.add","path":"/x"}{"v":1}`, CodeBadJSON, "", ""},
		{"id not a string", `{"v":1,"type":"repo.add","id":5,"path":"/x"}`, CodeWrongType, "id", ""},
		{"missing v", `{"type":"repo.add","id":"c1","path":"/x"}`, CodeMissingField, "v", "c1"},
		{"v 2", `{"v":2,"type":"repo.add","id":"c1","path":"/x"}`, CodeBadVersion, "v", "c1"},
		{"v 1.0", `{"v":1.0,"type":"repo.add","path":"/x"}`, CodeBadVersion, "v", ""},
		{"v string", `{"v":"1","type":"repo.add","path":"/x"}`, CodeWrongType, "v", ""},
		{"missing type", `{"v":1,"id":"c1"}`, CodeMissingField, "type", "c1"},
		{"type not a string", `{"v":1,"type":7}`, CodeWrongType, "type", ""},
		{"unknown type", `{"v":1,"type":"goal.delete","id":"c2"}`, CodeUnknownType, "", "c2"},
		{"server type", `{"v":1,"type":"snapshot","id":"c2"}`, CodeUnknownType, "", "c2"},
		{"type case", `{"v":1,"type":"Hello","modVersion":"1","protocol":1}`, CodeUnknownType, "", ""},
		{"hello protocol 2", `{"v":1,"type":"hello","modVersion":"0.1.0","protocol":2}`, CodeBadVersion, "protocol", ""},
		{"hello protocol string", `{"v":1,"type":"hello","modVersion":"0.1.0","protocol":"1"}`, CodeWrongType, "protocol", ""},
		{"hello no modVersion", `{"v":1,"type":"hello","protocol":1}`, CodeMissingField, "modVersion", ""},
		{"hello no protocol", `{"v":1,"type":"hello","modVersion":"0.1.0"}`, CodeMissingField, "protocol", ""},
		{"goal.submit no text", `{"v":1,"type":"goal.submit","id":"c3"}`, CodeMissingField, "text", "c3"},
		{"goal.submit text null", `{"v":1,"type":"goal.submit","id":"c3","text":null}`, CodeMissingField, "text", "c3"},
		{"goal.submit TEXT", `{"v":1,"type":"goal.submit","TEXT":"x"}`, CodeMissingField, "text", ""},
		{"goal.submit text number", `{"v":1,"type":"goal.submit","text":5}`, CodeWrongType, "text", ""},
		{"goal.submit repoId bool", `{"v":1,"type":"goal.submit","text":"x","repoId":true}`, CodeWrongType, "repoId", ""},
		{"user.message no to", `{"v":1,"type":"user.message","text":"hi"}`, CodeMissingField, "to", ""},
		{"user.message no text", `{"v":1,"type":"user.message","to":"all"}`, CodeMissingField, "text", ""},
		{"decision.answer no decisionId", `{"v":1,"type":"decision.answer","option":"Merge"}`, CodeMissingField, "decisionId", ""},
		{"decision.answer option fraction", `{"v":1,"type":"decision.answer","decisionId":"d1","option":1.5}`, CodeWrongType, "option", ""},
		{"decision.answer option negative", `{"v":1,"type":"decision.answer","decisionId":"d1","option":-1}`, CodeWrongType, "option", ""},
		{"decision.answer option bool", `{"v":1,"type":"decision.answer","decisionId":"d1","option":true}`, CodeWrongType, "option", ""},
		{"decision.answer option object", `{"v":1,"type":"decision.answer","decisionId":"d1","option":{}}`, CodeWrongType, "option", ""},
		{"decision.answer option huge", `{"v":1,"type":"decision.answer","decisionId":"d1","option":99999999999999999999999}`, CodeWrongType, "option", ""},
		{"task.action bad action", `{"v":1,"type":"task.action","id":"c4","taskId":"t1","action":"delete"}`, CodeBadEnum, "action", "c4"},
		{"task.action no action", `{"v":1,"type":"task.action","taskId":"t1"}`, CodeMissingField, "action", ""},
		{"task.action empty action", `{"v":1,"type":"task.action","taskId":"t1","action":""}`, CodeBadEnum, "action", ""},
		{"task.action arg number", `{"v":1,"type":"task.action","taskId":"t1","action":"prioritize","arg":5}`, CodeWrongType, "arg", ""},
		{"agent.action action case", `{"v":1,"type":"agent.action","agentId":"kit","action":"Pause"}`, CodeBadEnum, "action", ""},
		{"agent.action no agentId", `{"v":1,"type":"agent.action","action":"pause"}`, CodeMissingField, "agentId", ""},
		{"diff.request no requestId", `{"v":1,"type":"diff.request","repoId":"r","worktree":"w"}`, CodeMissingField, "requestId", ""},
		{"diff.request no worktree", `{"v":1,"type":"diff.request","requestId":"r7","repoId":"r"}`, CodeMissingField, "worktree", ""},
		{"repo.add path array", `{"v":1,"type":"repo.add","path":["/x"]}`, CodeWrongType, "path", ""},
		{"repo.add no path", `{"v":1,"type":"repo.add","id":"c5"}`, CodeMissingField, "path", "c5"},
	}
	sentinels := map[Code]error{
		CodeBadJSON: ErrBadJSON, CodeBadVersion: ErrBadVersion, CodeUnknownType: ErrUnknownType,
		CodeMissingField: ErrMissingField, CodeWrongType: ErrWrongType, CodeBadEnum: ErrBadEnum,
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := DecodeClient([]byte(c.in))
			if err == nil {
				t.Fatalf("decoded %#v, want %s", m, c.code)
			}
			if m != nil {
				t.Errorf("message %#v returned with the error", m)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err %T %v is not a *DecodeError", err, err)
			}
			if de.Code != c.code || de.Field != c.field || de.ID != c.id {
				t.Errorf("got code %s field %q id %q (%v), want %s %q %q", de.Code, de.Field, de.ID, err, c.code, c.field, c.id)
			}
			if !errors.Is(err, sentinels[c.code]) {
				t.Errorf("errors.Is(%v, %v) false", err, sentinels[c.code])
			}
			for code, s := range sentinels {
				if code != c.code && errors.Is(err, s) {
					t.Errorf("%v also matches %v", err, s)
				}
			}
		})
	}
}

// TestDecodeClientLenient covers what receivers must accept: unknown
// fields, optional nulls, and the option union's two forms.
func TestDecodeClientLenient(t *testing.T) {
	cases := []struct {
		in   string
		want ClientMessage
	}{
		{`{"v":1,"type":"goal.submit","text":"x","extra":{"a":[1]},"repoId":null}`, GoalSubmit{Text: "x"}},
		{`{"v":1,"type":"goal.submit","text":"x","Text":"y","REPOID":"r"}`, GoalSubmit{Text: "x"}},
		{`{"type":"hello","protocol":1,"modVersion":"0.2","v":1}`, Hello{ModVersion: "0.2", Protocol: 1}},
		{`{"v":1,"type":"decision.answer","decisionId":"d1","option":0}`, DecisionAnswerMsg{DecisionID: "d1", Option: IndexOption(0)}},
		{`{"v":1,"type":"decision.answer","decisionId":"d1","option":""}`, DecisionAnswerMsg{DecisionID: "d1", Option: LabelOption("")}},
		{`{"v":1,"type":"decision.answer","decisionId":"d1","text":"free text"}`, DecisionAnswerMsg{DecisionID: "d1", Text: "free text"}},
		{`{"v":1,"type":"agent.action","id":"c9","agentId":"juniper","action":"spawn","arg":"t4"}`, AgentActionMsg{ID: "c9", AgentID: "juniper", Action: AgentSpawn, Arg: "t4"}},
		{` {"v":1,"type":"repo.add","path":"/x"} ` + "\n", RepoAdd{Path: "/x"}},
	}
	for _, c := range cases {
		got, err := DecodeClient([]byte(c.in))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.in, got, c.want)
		}
	}
}

// TestOptionResolve checks the label-or-index rule of decision.answer.
func TestOptionResolve(t *testing.T) {
	opts := MergeOptions()
	cases := []struct {
		o    OptionRef
		want string
		ok   bool
	}{
		{*LabelOption(OptionMerge), OptionMerge, true},
		{*LabelOption("merge"), "", false},
		{*IndexOption(1), OptionRequestChanges, true},
		{*IndexOption(3), "", false},
		{*IndexOption(-1), "", false},
	}
	for _, c := range cases {
		got, ok := c.o.Resolve(opts)
		if got != c.want || ok != c.ok {
			t.Errorf("%+v.Resolve = %q %v, want %q %v", c.o, got, ok, c.want, c.ok)
		}
	}
}

// TestDecodeServerRejects checks that nested entities are held to the same
// rules, with the path of the field at fault.
func TestDecodeServerRejects(t *testing.T) {
	cases := []struct {
		in    string
		code  Code
		field string
	}{
		{`{"v":1,"type":"task.upsert","task":{"id":"t1","title":"x","status":"doing","priority":0,"ci":"pass","createdBy":"user","createdAt":1,"updatedAt":1}}`, CodeMissingField, "task.deps"},
		{`{"v":1,"type":"task.upsert","task":{"id":"t1","title":"x","status":"doing","deps":[null],"priority":0,"ci":"pass","createdBy":"user","createdAt":1,"updatedAt":1}}`, CodeWrongType, "task.deps[0]"},
		{`{"v":1,"type":"task.upsert","task":{"id":"t1","title":"x","status":"wip","deps":[],"priority":0,"ci":"pass","createdBy":"user","createdAt":1,"updatedAt":1}}`, CodeBadEnum, "task.status"},
		{`{"v":1,"type":"agent.log","agentId":"kit","entries":[{"ts":1,"kind":"tool","text":"a"},{"ts":"2","kind":"tool","text":"b"}]}`, CodeWrongType, "entries[1].ts"},
		{`{"v":1,"type":"agent.log","agentId":"kit","entries":{}}`, CodeWrongType, "entries"},
		{`{"v":1,"type":"ack","re":"c1"}`, CodeMissingField, "ok"},
		{`{"v":1,"type":"ack","re":"c1","ok":true,"result":[]}`, CodeWrongType, "result"},
		{`{"v":1,"type":"foreman.status","status":null}`, CodeMissingField, "status"},
		{`{"v":1,"type":"hello","modVersion":"x","protocol":1}`, CodeUnknownType, ""},
	}
	for _, c := range cases {
		_, err := DecodeServer([]byte(c.in))
		var de *DecodeError
		if !errors.As(err, &de) || de.Code != c.code || de.Field != c.field {
			t.Errorf("%s: err %v, want %s at %q", c.in, err, c.code, c.field)
		}
	}
}

// TestReplies checks the replies a server sends for an invalid or failed
// message: error {message, re?}, and a failed ack {re, ok:false, error}
// only when the message had an id.
func TestReplies(t *testing.T) {
	_, err := DecodeClient([]byte(`{"v":1,"type":"goal.submit","id":"c12"}`))
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatal(err)
	}
	got := encodeAll(t, de.Replies())
	want := []string{
		`{"v":1,"type":"error","message":` + quote(err.Error()) + `,"re":"c12"}`,
		`{"v":1,"type":"ack","re":"c12","ok":false,"error":` + quote(err.Error()) + `}`,
	}
	sameJSON(t, got, want)

	got = encodeAll(t, Failure("", errors.New(`no agent named "kitt"`)))
	sameJSON(t, got, []string{`{"v":1,"type":"error","message":"no agent named \"kitt\""}`})
}

func encodeAll(t *testing.T, ms []ServerMessage) []string {
	t.Helper()
	var out []string
	for _, m := range ms {
		b, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func sameJSON(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d messages %q, want %d %q", len(got), got, len(want), want)
	}
	for i := range got {
		if !reflect.DeepEqual(jsonValue(t, []byte(got[i])), jsonValue(t, []byte(want[i]))) {
			t.Errorf("message %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}
