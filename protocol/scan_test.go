package protocol_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func TestArrayOfObjects(t *testing.T) {
	for in, want := range map[string]bool{
		`[]`: true, `[{}]`: true, `[{},{"a":[1,2]}]`: true, `[{"s":"[\"x\",1]"}]`: true, `[{"a":"\\"},{}]`: true,
		``: false, `null`: false, `{}`: false, `[1]`: false, `[{},1]`: false, `[{},"x"]`: false, `[{},[]]`: false,
		`[null]`: false, `[ {}]`: false, `[{} ]`: false, `[{"a": 1}]`: false, `[{"a":"x y"}]`: true,
		`[[]]`: false, `[{"a":[{},1]},{}]`: true, "[{}]\n": false,
	} {
		if got := protocol.ArrayOfObjects([]byte(in)); got != want {
			t.Errorf("ArrayOfObjects(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestCutSyncResponse(t *testing.T) {
	id, data, ok := protocol.CutSyncResponse([]byte(`{"type":"response","id":"d-7","command":"get_sync","success":true,"data":{"status":"idle"}}`))
	if !ok || id != "d-7" || string(data) != `{"status":"idle"}` {
		t.Fatalf("CutSyncResponse = %q, %s, %v", id, data, ok)
	}
	for _, rec := range []string{
		`{"type":"response","id":"d\"7","command":"get_sync","success":true,"data":{}}`,
		`{"type":"response","id":"d-7","command":"prompt","success":true,"data":{}}`,
		`{"type":"response","id":"d-7","command":"get_sync","success":false,"data":{}}`,
		`{"type":"response","id":"d-7","command":"get_sync","success":true,"data":}`,
		`{"type":"response","command":"get_sync","id":"d-7","success":true,"data":{}}`,
		`{"type":"response","id":"d-7","command":"get_sync","success":true,"data":`,
		` {"type":"response","id":"d-7","command":"get_sync","success":true,"data":{}}`,
	} {
		if _, _, ok := protocol.CutSyncResponse([]byte(rec)); ok {
			t.Errorf("CutSyncResponse(%s) accepted", rec)
		}
	}
	// Members after data are cut into data, which then is not one JSON
	// value: the caller has to check it.
	_, data, ok = protocol.CutSyncResponse([]byte(`{"type":"response","id":"d-7","command":"get_sync","success":true,"data":{},"error":{}}`))
	if !ok || json.Valid(data) {
		t.Errorf("data %s (ok %v): want cut, and not one JSON value", data, ok)
	}
}

func TestWholeObject(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`{"type":"status"}`, true},
		{" {\"type\":\"status\"} \r", true},
		{`{"type":"status"`, false},
		{`["type","status"]`, false},
		{`{"a":1}`, false}, // no type
		{`{}`, false},
		{``, false},
	} {
		if got := protocol.WholeObject([]byte(tc.line), protocol.PeekType([]byte(tc.line))); got != tc.want {
			t.Errorf("WholeObject(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

func TestSetMember(t *testing.T) {
	for _, tc := range []struct {
		name, rec, key, value, want string
	}{
		{"absent", `{"type":"prompt","message":"hi"}`, "id", `"d-1"`, `{"type":"prompt","message":"hi","id":"d-1"}`},
		{"present goes last", `{"id":"c-9","type":"prompt"}`, "id", `"d-1"`, `{"type":"prompt","id":"d-1"}`},
		{"empty object", `{}`, "id", `"d-1"`, `{"id":"d-1"}`},
		{"empty object spaced", " { \n } ", "strict", `true`, ` {"strict":true} `},
		{"duplicates all go", `{"id":"a","type":"steer","id":"b"}`, "id", `"d-2"`, `{"type":"steer","id":"d-2"}`},
		{"escaped key matches", `{"\u0069d":"a","type":"x"}`, "id", `"d-3"`, `{"type":"x","id":"d-3"}`},
		{"case variants go too", `{"ID":"a","type":"x","\u017fource":1}`, "id", `"d-4"`, `{"type":"x","\u017fource":1,"id":"d-4"}`},
		{"folded variant goes", `{"\u017fource":"cli","type":"x"}`, "source", `"unix"`, `{"type":"x","source":"unix"}`},
		{"nested key untouched", `{"args":{"id":"inner"},"type":"session_op"}`, "id", `"d-5"`, `{"args":{"id":"inner"},"type":"session_op","id":"d-5"}`},
		{"strings with structure", `{"message":"a\"},{\"id\":1","type":"prompt"}`, "id", `"d-6"`, `{"message":"a\"},{\"id\":1","type":"prompt","id":"d-6"}`},
		{"whitespace between members", "{ \"type\" : \"prompt\" ,\n\t\"id\": 5 }", "id", `"d-7"`, `{"type" : "prompt","id":"d-7"}`},
		{"value types", `{"a":[1,{"b":null}],"n":-1.5e3,"t":true,"f":false,"z":null}`, "source", `"unix"`, `{"a":[1,{"b":null}],"n":-1.5e3,"t":true,"f":false,"z":null,"source":"unix"}`},
		{"key needing escapes", `{}`, "a\"b", `1`, `{"a\"b":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.rec)
			got, err := protocol.SetMember(in, tc.key, []byte(tc.value))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("SetMember(%s, %q, %s) = %s, want %s", tc.rec, tc.key, tc.value, got, tc.want)
			}
			if string(in) != tc.rec {
				t.Errorf("input modified: %s", in)
			}
		})
	}
}

func TestDeleteMember(t *testing.T) {
	for _, tc := range []struct {
		name, rec, key, want string
	}{
		{"only member", `{"agent_id":"a"}`, "agent_id", `{}`},
		{"first", `{"agent_id":"a","type":"prompt"}`, "agent_id", `{"type":"prompt"}`},
		{"last", `{"type":"prompt","agent_id":"a"}`, "agent_id", `{"type":"prompt"}`},
		{"middle", `{"type":"prompt","agent_id":"a","id":"x"}`, "agent_id", `{"type":"prompt","id":"x"}`},
		{"duplicates", `{"agent_id":"a","type":"p","agent_id":{"x":[1]}}`, "agent_id", `{"type":"p"}`},
		{"absent unchanged", "{ \"type\" :\n\"p\" }", "agent_id", "{ \"type\" :\n\"p\" }"},
		{"nested untouched", `{"args":{"agent_id":"a"},"type":"p"}`, "agent_id", `{"args":{"agent_id":"a"},"type":"p"}`},
		{"escaped key", `{"agent\u005fid":"a","type":"p"}`, "agent_id", `{"type":"p"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.DeleteMember([]byte(tc.rec), tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("DeleteMember(%s, %q) = %s, want %s", tc.rec, tc.key, got, tc.want)
			}
		})
	}
}

func TestRewriteMemberRefuses(t *testing.T) {
	for _, rec := range []string{``, `[]`, `"x"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1} x`, `{"a":"1}`, `{"a":[1}`, `{"a":1 "b":2}`, `{a:1}`} {
		if _, err := protocol.DeleteMember([]byte(rec), "a"); err == nil {
			t.Errorf("DeleteMember(%s) accepted", rec)
		}
		if _, err := protocol.SetMember([]byte(rec), "a", []byte(`1`)); err == nil {
			t.Errorf("SetMember(%s) accepted", rec)
		}
	}
	if _, err := protocol.DeleteMember([]byte(`[]`), "a"); !errors.Is(err, protocol.ErrNotObject) {
		t.Errorf("DeleteMember([]) error %v, want ErrNotObject", err)
	}
	if _, err := protocol.SetMember([]byte(`{}`), "a", []byte(`{`)); err == nil {
		t.Error("SetMember with an invalid value accepted")
	}
}
