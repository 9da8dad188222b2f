package protocol_test

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestDecodeCommandStrict: a command that encoding/json would read with a
// meaning of its own choosing (a replaced character, the last of two equal
// keys) is refused with an INVALID_REQUEST naming the key
// (docs/protocol.md §2.3, strict input).
func TestDecodeCommandStrict(t *testing.T) {
	t.Parallel()
	bad := []struct{ name, rec, want string }{
		{"invalid UTF-8 in a value", "{\"id\":\"p\",\"type\":\"prompt\",\"agent_id\":\"a-1\",\"message\":\"hi \xff\"}", "not valid UTF-8"},
		{"invalid UTF-8 in a key", "{\"type\":\"agent.list\",\"\xc3\":1}", "not valid UTF-8"},
		{"overlong encoding", "{\"type\":\"agent.list\",\"x\":\"\xc0\xaf\"}", "not valid UTF-8"},
		{"duplicate type", `{"id":"d","type":"agent.list","type":"daemon.shutdown"}`, `field "type": duplicate key`},
		{"duplicate id", `{"id":"a","type":"agent.list","id":"b"}`, `field "id": duplicate key`},
		{"duplicate by escape", `{"type":"agent.list","typ\u0065":"daemon.shutdown"}`, `field "type": duplicate key`},
		{"duplicate by case at the top", `{"id":"d","type":"agent.list","TYPE":"daemon.shutdown"}`, `field "TYPE": duplicate key`},
		{"duplicate by Unicode folding", `{"id":"w","type":"subagent.wait","parent_agent_id":"a-1","handles":["j"],"handle\u017f":["k"]}`, "duplicate key"},
		{"nested duplicate", `{"id":"c","type":"agent.create","cwd":"/w","launch_policy":{"maxTasks":1,"maxTasks":9}}`, `field "launch_policy.maxTasks": duplicate key`},
		{"duplicate in an array element", `{"id":"j","type":"subagent.create","parent_agent_id":"a-1","tasks":[{"name":"a","task":"x","task":"y"}]}`, `field "tasks.task": duplicate key`},
		{"lone high surrogate", `{"id":"p","type":"prompt","agent_id":"a-1","message":"\ud800"}`, `field "message": invalid UTF-16 escape`},
		{"lone low surrogate", `{"id":"p","type":"prompt","agent_id":"a-1","message":"x\udc00y"}`, `field "message": invalid UTF-16 escape`},
		{"high surrogate then non-low", `{"id":"p","type":"prompt","agent_id":"a-1","message":"\ud800\u0041"}`, "invalid UTF-16 escape"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			cmd, h, err := protocol.DecodeCommand([]byte(tc.rec))
			if err == nil {
				t.Fatalf("decoded %#v, want an error", cmd)
			}
			if code := protocol.CodeOf(err); code != protocol.CodeInvalidRequest {
				t.Fatalf("code %s, want INVALID_REQUEST (%v)", code, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
			if h.Type == "" {
				t.Fatalf("header not returned: %+v", h)
			}
		})
	}
	good := []struct{ name, rec string }{
		{"surrogate pair", `{"id":"p","type":"prompt","agent_id":"a-1","message":"\ud83d\ude00 ok"}`},
		{"raw multibyte", `{"id":"p","type":"prompt","agent_id":"a-1","message":"héllo ✓ 😀"}`},
		{"same key in sibling objects", `{"id":"j","type":"subagent.create","parent_agent_id":"a-1","tasks":[{"name":"a","task":"x"},{"name":"b","task":"y"}],"strategy":"parallel"}`},
		{"same key at two depths", `{"id":"s","type":"session_op","agent_id":"a-1","op":"compact","args":{"op":"x","type":"y"}}`},
		{"keys differing in case below the top", `{"id":"s","type":"session_op","agent_id":"a-1","op":"compact","args":{"a":1,"A":2}}`},
		{"escaped quote in a key", `{"id":"s","type":"session_op","agent_id":"a-1","op":"compact","args":{"a\"b":1,"a\\b":2}}`},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := protocol.DecodeCommand([]byte(tc.rec)); err != nil {
				t.Fatalf("DecodeCommand: %v", err)
			}
		})
	}
}
