package protocol_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func TestDecodeHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rec     string
		want    protocol.Header
		wantErr string // substring of the error message; "" means success
	}{
		{name: "type only", rec: `{"type":"abort"}`, want: protocol.Header{Type: "abort"}},
		{name: "full envelope", rec: `{"id":"r1","type":"prompt","agent_id":"a-3","message":"hi"}`, want: protocol.Header{ID: "r1", Type: "prompt", AgentID: "a-3"}},
		{name: "surrounding whitespace", rec: " \t{\"type\":\"abort\"}\r\n", want: protocol.Header{Type: "abort"}},
		{name: "unknown type is still a header", rec: `{"type":"bogus"}`, want: protocol.Header{Type: "bogus"}},
		{name: "null id is absent", rec: `{"type":"abort","id":null}`, want: protocol.Header{Type: "abort"}},
		{name: "escaped type", rec: `{"type":"a\"b"}`, want: protocol.Header{Type: `a"b`}},

		{name: "empty", rec: ``, wantErr: "JSON object"},
		{name: "array", rec: `[{"type":"abort"}]`, wantErr: "JSON object"},
		{name: "string", rec: `"abort"`, wantErr: "JSON object"},
		{name: "number", rec: `42`, wantErr: "JSON object"},
		{name: "null", rec: `null`, wantErr: "JSON object"},
		{name: "truncated", rec: `{"id":"r1","type":"abort"`, wantErr: "malformed JSON"},
		{name: "trailing garbage", rec: `{"type":"abort"} x`, wantErr: "malformed JSON"},
		{name: "missing type", rec: `{"id":"r1"}`, want: protocol.Header{ID: "r1"}, wantErr: `field "type": required`},
		{name: "null type", rec: `{"id":"r1","type":null}`, want: protocol.Header{ID: "r1"}, wantErr: `field "type": required`},
		{name: "numeric type", rec: `{"id":"r1","type":5}`, want: protocol.Header{ID: "r1"}, wantErr: `field "type": expected string, got number`},
		{name: "object type", rec: `{"id":"r1","type":{}}`, want: protocol.Header{ID: "r1"}, wantErr: `field "type": expected string, got object`},
		{name: "empty type", rec: `{"id":"r1","type":""}`, want: protocol.Header{ID: "r1"}, wantErr: `field "type": must not be empty`},
		{name: "numeric id", rec: `{"id":7,"type":"abort"}`, want: protocol.Header{Type: "abort"}, wantErr: `field "id": expected string, got number`},
		{name: "array id", rec: `{"id":["r1"],"type":"abort"}`, want: protocol.Header{Type: "abort"}, wantErr: `field "id": expected string, got array`},
		{name: "boolean agent_id", rec: `{"id":"r1","type":"abort","agent_id":true}`, want: protocol.Header{ID: "r1", Type: "abort"}, wantErr: `field "agent_id": expected string, got boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := protocol.DecodeHeader([]byte(tt.rec))
			if h != tt.want {
				t.Errorf("header = %+v, want %+v", h, tt.want)
			}
			checkErr(t, err, tt.wantErr)
		})
	}
}

// checkErr asserts that err is nil when want is "", and otherwise an
// INVALID_REQUEST *protocol.Error whose message contains want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got nil error, want one containing %q", want)
	}
	if code := protocol.CodeOf(err); code != protocol.CodeInvalidRequest {
		t.Errorf("CodeOf(%v) = %s, want INVALID_REQUEST", err, code)
	}
	pe, ok := err.(*protocol.Error)
	if !ok {
		t.Fatalf("error is %T, want *protocol.Error", err)
	}
	if !strings.Contains(pe.Message, want) {
		t.Errorf("message %q does not contain %q", pe.Message, want)
	}
}

// TestDecodeCommandInvalid covers the envelope, JSON type and Validate rules
// of every command: each case must fail with INVALID_REQUEST, keep the id
// when it was readable, and name the offending field.
func TestDecodeCommandInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rec     string
		wantID  string
		wantTyp string
		wantErr string
	}{
		// Envelope.
		{name: "malformed JSON", rec: `{"id":"r1","type":"prompt",`, wantErr: "malformed JSON"},
		{name: "not JSON at all", rec: `hello`, wantErr: "JSON object"},
		{name: "array", rec: `[1,2]`, wantErr: "JSON object"},
		{name: "string", rec: `"prompt"`, wantErr: "JSON object"},
		{name: "number", rec: `1`, wantErr: "JSON object"},
		{name: "null", rec: `null`, wantErr: "JSON object"},
		{name: "missing type", rec: `{"id":"r1","message":"hi"}`, wantID: "r1", wantErr: `field "type": required`},
		{name: "type not a string", rec: `{"id":"r1","type":["prompt"]}`, wantID: "r1", wantErr: `field "type"`},
		{name: "empty type", rec: `{"id":"r1","type":""}`, wantID: "r1", wantErr: `field "type"`},
		{name: "id not a string", rec: `{"id":1,"type":"prompt","message":"hi"}`, wantTyp: "prompt", wantErr: `field "id"`},
		{name: "agent_id not a string", rec: `{"id":"r1","type":"prompt","agent_id":{},"message":"hi"}`, wantID: "r1", wantTyp: "prompt", wantErr: `field "agent_id"`},
		{name: "unknown type", rec: `{"id":"r1","type":"frobnicate"}`, wantID: "r1", wantTyp: "frobnicate", wantErr: `unknown type "frobnicate"`},
		{name: "event type is not a command", rec: `{"id":"r1","type":"status","status":"idle"}`, wantID: "r1", wantTyp: "status", wantErr: `unknown type "status"`},

		// Paged lists (docs/protocol.md §13 "Paged lists").
		{name: "agent.list cursor not base64", rec: `{"id":"r1","type":"agent.list","limit":2,"cursor":"%%%"}`, wantID: "r1", wantTyp: "agent.list", wantErr: `field "cursor": malformed`},
		{name: "agent.list cursor of jobs", rec: `{"id":"r1","type":"agent.list","cursor":"ai4wLmpvYi0x"}`, wantID: "r1", wantTyp: "agent.list", wantErr: `field "cursor": not a cursor of this list`},
		{name: "agent.list negative limit", rec: `{"id":"r1","type":"agent.list","limit":-1}`, wantID: "r1", wantTyp: "agent.list", wantErr: `field "limit"`},
		{name: "agent.list negative since", rec: `{"id":"r1","type":"agent.list","since_ms":-1}`, wantID: "r1", wantTyp: "agent.list", wantErr: `field "since_ms"`},
		{name: "agent.list active string", rec: `{"id":"r1","type":"agent.list","active":"yes"}`, wantID: "r1", wantTyp: "agent.list", wantErr: `field "active"`},
		{name: "jobs.list cursor garbage", rec: `{"id":"r1","type":"jobs.list","cursor":"bm9wZQ"}`, wantID: "r1", wantTyp: "jobs.list", wantErr: `field "cursor": malformed`},
		{name: "jobs.list cursor of agents", rec: `{"id":"r1","type":"jobs.list","cursor":"YS4xLmFnZW50LTE"}`, wantID: "r1", wantTyp: "jobs.list", wantErr: `field "cursor": not a cursor of this list`},

		// Wrong JSON types name the field.
		{name: "prompt message number", rec: `{"id":"r1","type":"prompt","message":5}`, wantID: "r1", wantTyp: "prompt", wantErr: `field "message": expected string, got number`},
		{name: "prompt images object", rec: `{"id":"r1","type":"prompt","message":"x","images":{}}`, wantID: "r1", wantTyp: "prompt", wantErr: `field "images": expected array, got object`},
		{name: "prompt image data number", rec: `{"type":"prompt","images":[{"type":"image","data":1,"mime_type":"image/png"}]}`, wantTyp: "prompt", wantErr: `field "images.data"`},
		{name: "session_op nested wrong type", rec: `{"id":"r1","type":"session_op","op":"compact","args":{"keep_recent_tokens":"x"}}`, wantID: "r1", wantTyp: "session_op", wantErr: `field "args.keep_recent_tokens": expected number, got string`},
		{name: "session_op args not object", rec: `{"type":"session_op","op":"compact","args":[]}`, wantTyp: "session_op", wantErr: `field "args": expected object, got array`},
		{name: "agent.kill force string", rec: `{"type":"agent.kill","agent_id":"a","force":"yes"}`, wantTyp: "agent.kill", wantErr: `field "force": expected boolean, got string`},
		{name: "agent.create depth fraction", rec: `{"type":"agent.create","cwd":"/x","depth":1.5}`, wantTyp: "agent.create", wantErr: `field "depth"`},
		{name: "subagent.wait timeout string", rec: `{"type":"subagent.wait","parent_agent_id":"p","handles":["h"],"timeout":"10"}`, wantTyp: "subagent.wait", wantErr: `field "timeout": expected number, got string`},
		{name: "subagent.wait handles string", rec: `{"type":"subagent.wait","parent_agent_id":"p","handles":"h"}`, wantTyp: "subagent.wait", wantErr: `field "handles": expected array, got string`},
		{name: "subagent.create task list of strings", rec: `{"type":"subagent.create","parent_agent_id":"p","tasks":["a"],"strategy":"parallel"}`, wantTyp: "subagent.create", wantErr: `field "tasks"`},

		// prompt / steer.
		{name: "prompt without message or images", rec: `{"id":"r1","type":"prompt"}`, wantID: "r1", wantTyp: "prompt", wantErr: `field "message": required`},
		{name: "prompt empty message", rec: `{"type":"prompt","message":""}`, wantTyp: "prompt", wantErr: `field "message": required`},
		{name: "prompt bad streaming_behavior", rec: `{"type":"prompt","message":"x","streaming_behavior":"now"}`, wantTyp: "prompt", wantErr: `field "streaming_behavior": must be one of steer, follow_up`},
		{name: "steer without message", rec: `{"type":"steer","agent_id":"a"}`, wantTyp: "steer", wantErr: `field "message": required`},

		// Settings commands.
		{name: "set_mode without mode", rec: `{"type":"set_mode"}`, wantTyp: "set_mode", wantErr: `field "mode": required`},
		{name: "set_model without model", rec: `{"type":"set_model"}`, wantTyp: "set_model", wantErr: `field "model": required`},
		{name: "set_reasoning_level without model", rec: `{"type":"set_reasoning_level","effort":"high"}`, wantTyp: "set_reasoning_level", wantErr: `field "model": required`},
		{name: "set_reasoning_level without effort", rec: `{"type":"set_reasoning_level","model":"m"}`, wantTyp: "set_reasoning_level", wantErr: `field "effort": required`},

		// session_op.
		{name: "session_op without op", rec: `{"type":"session_op"}`, wantTyp: "session_op", wantErr: `field "op": required`},
		{name: "session_op unknown op", rec: `{"type":"session_op","op":"delete"}`, wantTyp: "session_op", wantErr: `field "op": must be one of list, compact, fork`},
		{name: "compact keep_recent_tokens zero", rec: `{"type":"session_op","op":"compact","args":{"keep_recent_tokens":0}}`, wantTyp: "session_op", wantErr: `field "args.keep_recent_tokens": must be a positive integer`},
		{name: "compact keep_recent_tokens negative", rec: `{"type":"session_op","op":"compact","args":{"keep_recent_tokens":-5}}`, wantTyp: "session_op", wantErr: `field "args.keep_recent_tokens"`},
		{name: "fork without args", rec: `{"type":"session_op","op":"fork"}`, wantTyp: "session_op", wantErr: `field "args.from_entry_id": required`},
		{name: "fork without from_entry_id", rec: `{"type":"session_op","op":"fork","args":{}}`, wantTyp: "session_op", wantErr: `field "args.from_entry_id": required`},

		// permission_response.
		{name: "permission_response without request_id", rec: `{"type":"permission_response","decision":"allow"}`, wantTyp: "permission_response", wantErr: `field "request_id": required`},
		{name: "permission_response both forms", rec: `{"type":"permission_response","request_id":"req-7","choice_id":"c1","decision":"allow"}`, wantTyp: "permission_response", wantErr: "mutually exclusive"},
		{name: "permission_response neither form", rec: `{"type":"permission_response","request_id":"req-7"}`, wantTyp: "permission_response", wantErr: "one of choice_id or decision is required"},
		{name: "permission_response unknown decision", rec: `{"type":"permission_response","request_id":"req-7","decision":"maybe"}`, wantTyp: "permission_response", wantErr: `field "decision": must be one of allow, allow_always, deny`},

		// ui_response.
		{name: "ui_response without request_id", rec: `{"type":"ui_response","value":"x"}`, wantTyp: "ui_response", wantErr: `field "request_id": required`},
		{name: "ui_response without value", rec: `{"type":"ui_response","request_id":"u1"}`, wantTyp: "ui_response", wantErr: `field "value": required`},
		{name: "ui_response number", rec: `{"type":"ui_response","request_id":"u1","value":3}`, wantTyp: "ui_response", wantErr: `field "value": expected a string, an array of strings, or null, got number`},
		{name: "ui_response boolean", rec: `{"type":"ui_response","request_id":"u1","value":true}`, wantTyp: "ui_response", wantErr: "got boolean"},
		{name: "ui_response object", rec: `{"type":"ui_response","request_id":"u1","value":{"a":"b"}}`, wantTyp: "ui_response", wantErr: "got object"},
		{name: "ui_response array of numbers", rec: `{"type":"ui_response","request_id":"u1","value":["a",1]}`, wantTyp: "ui_response", wantErr: "got array"},
		{name: "ui_response nested array", rec: `{"type":"ui_response","request_id":"u1","value":[["a"]]}`, wantTyp: "ui_response", wantErr: "got array"},

		// agent.* commands.
		{name: "agent.create without cwd", rec: `{"id":"c1","type":"agent.create"}`, wantID: "c1", wantTyp: "agent.create", wantErr: `field "cwd": required`},
		{name: "agent.create bad headless_policy", rec: `{"type":"agent.create","cwd":"/x","headless_policy":"allow"}`, wantTyp: "agent.create", wantErr: `field "headless_policy"`},
		{name: "agent.create depth from a client", rec: `{"type":"agent.create","cwd":"/x","depth":0}`, wantTyp: "agent.create", wantErr: `field "depth": is set by the daemon`},
		{name: "agent.attach without agent_id", rec: `{"id":"r1","type":"agent.attach"}`, wantID: "r1", wantTyp: "agent.attach", wantErr: `field "agent_id": required`},
		{name: "agent.attach bad role", rec: `{"type":"agent.attach","agent_id":"a","role":"owner"}`, wantTyp: "agent.attach", wantErr: `field "role": must be one of interactive, observer`},
		{name: "agent.detach without agent_id", rec: `{"type":"agent.detach"}`, wantTyp: "agent.detach", wantErr: `field "agent_id": required`},
		{name: "agent.terminate without agent_id", rec: `{"type":"agent.terminate"}`, wantTyp: "agent.terminate", wantErr: `field "agent_id": required`},
		{name: "agent.kill without agent_id", rec: `{"type":"agent.kill","force":true}`, wantTyp: "agent.kill", wantErr: `field "agent_id": required`},
		{name: "agent.remove without agent_ids", rec: `{"type":"agent.remove"}`, wantTyp: "agent.remove", wantErr: `field "agent_ids": must name at least one agent`},
		{name: "agent.remove empty id", rec: `{"type":"agent.remove","agent_ids":["a",""]}`, wantTyp: "agent.remove", wantErr: `field "agent_ids[1]": must not be empty`},
		{name: "agent.update without agent_id", rec: `{"type":"agent.update","title":"t"}`, wantTyp: "agent.update", wantErr: `field "agent_id": required`},
		{name: "agent.update without title", rec: `{"type":"agent.update","agent_id":"a"}`, wantTyp: "agent.update", wantErr: `field "title": required`},

		// workspace.* commands.
		{name: "workspace.create without cwd", rec: `{"type":"workspace.create"}`, wantTyp: "workspace.create", wantErr: `field "cwd": required`},
		{name: "workspace.attach without workspace_id", rec: `{"type":"workspace.attach"}`, wantTyp: "workspace.attach", wantErr: `field "workspace_id": required`},
		{name: "workspace.status without workspace_id", rec: `{"type":"workspace.status"}`, wantTyp: "workspace.status", wantErr: `field "workspace_id": required`},
		{name: "workspace.retire without workspace_id", rec: `{"type":"workspace.retire"}`, wantTyp: "workspace.retire", wantErr: `field "workspace_id": required`},
		{name: "workspace.retire bad disposition", rec: `{"type":"workspace.retire","workspace_id":"w","branch_disposition":"force"}`, wantTyp: "workspace.retire", wantErr: `field "branch_disposition"`},

		// subagent.create.
		{name: "subagent.create without parent", rec: `{"type":"subagent.create","name":"n","task":"t"}`, wantTyp: "subagent.create", wantErr: `field "parent_agent_id": required`},
		{name: "subagent.create bad strategy", rec: `{"type":"subagent.create","parent_agent_id":"p","name":"n","task":"t","strategy":"random"}`, wantTyp: "subagent.create", wantErr: `field "strategy": must be one of single, parallel, chain`},
		{name: "subagent.create bad isolation", rec: `{"type":"subagent.create","parent_agent_id":"p","name":"n","task":"t","isolation":"sandbox"}`, wantTyp: "subagent.create", wantErr: `field "isolation": must be one of none, workspace`},
		{name: "subagent.create nothing to do", rec: `{"type":"subagent.create","parent_agent_id":"p"}`, wantTyp: "subagent.create", wantErr: `field "task": required`},
		{name: "subagent.create single without name", rec: `{"type":"subagent.create","parent_agent_id":"p","task":"t"}`, wantTyp: "subagent.create", wantErr: `field "name": required`},
		{name: "subagent.create single with name only", rec: `{"type":"subagent.create","parent_agent_id":"p","name":"n"}`, wantTyp: "subagent.create", wantErr: `field "task": required`},
		{name: "subagent.create single with parallel", rec: `{"type":"subagent.create","parent_agent_id":"p","name":"n","task":"t","strategy":"parallel"}`, wantTyp: "subagent.create", wantErr: `field "strategy"`},
		{name: "subagent.create single with chain", rec: `{"type":"subagent.create","parent_agent_id":"p","name":"n","task":"t","strategy":"chain"}`, wantTyp: "subagent.create", wantErr: `field "strategy"`},
		{name: "subagent.create both forms (task)", rec: `{"type":"subagent.create","parent_agent_id":"p","task":"t","tasks":[{"name":"a","task":"b"}],"strategy":"parallel"}`, wantTyp: "subagent.create", wantErr: `field "tasks": give either`},
		{name: "subagent.create both forms (name)", rec: `{"type":"subagent.create","parent_agent_id":"p","name":"n","tasks":[{"name":"a","task":"b"}],"strategy":"parallel"}`, wantTyp: "subagent.create", wantErr: `field "tasks": give either`},
		{name: "subagent.create batch without strategy", rec: `{"type":"subagent.create","parent_agent_id":"p","tasks":[{"name":"a","task":"b"}]}`, wantTyp: "subagent.create", wantErr: `field "strategy": required for a batch`},
		{name: "subagent.create batch with single", rec: `{"type":"subagent.create","parent_agent_id":"p","tasks":[{"name":"a","task":"b"},{"name":"c","task":"d"}],"strategy":"single"}`, wantTyp: "subagent.create", wantErr: `field "strategy"`},
		{name: "subagent.create batch task without name", rec: `{"type":"subagent.create","parent_agent_id":"p","tasks":[{"name":"a","task":"b"},{"task":"d"}],"strategy":"chain"}`, wantTyp: "subagent.create", wantErr: `field "tasks[1].name": required`},
		{name: "subagent.create batch task without task", rec: `{"type":"subagent.create","parent_agent_id":"p","tasks":[{"name":"a"}],"strategy":"chain"}`, wantTyp: "subagent.create", wantErr: `field "tasks[0].task": required`},

		// subagent.wait.
		{name: "subagent.wait without parent", rec: `{"type":"subagent.wait","handles":["h"]}`, wantTyp: "subagent.wait", wantErr: `field "parent_agent_id": required`},
		{name: "subagent.wait without handles", rec: `{"type":"subagent.wait","parent_agent_id":"p"}`, wantTyp: "subagent.wait", wantErr: `field "handles": at least one`},
		{name: "subagent.wait empty handles", rec: `{"type":"subagent.wait","parent_agent_id":"p","handles":[]}`, wantTyp: "subagent.wait", wantErr: `field "handles": at least one`},
		{name: "subagent.wait empty handle", rec: `{"type":"subagent.wait","parent_agent_id":"p","handles":["h",""]}`, wantTyp: "subagent.wait", wantErr: `field "handles[1]": must not be empty`},
		{name: "subagent.wait negative timeout", rec: `{"type":"subagent.wait","parent_agent_id":"p","handles":["h"],"timeout":-0.5}`, wantTyp: "subagent.wait", wantErr: `field "timeout": must not be negative`},
		{name: "subagent.wait bad mode", rec: `{"type":"subagent.wait","parent_agent_id":"p","handles":["h"],"mode":"first"}`, wantTyp: "subagent.wait", wantErr: `field "mode": must be one of any, all`},

		// Other subagent.* commands.
		{name: "subagent.steer without parent", rec: `{"type":"subagent.steer","target":"t","message":"m"}`, wantTyp: "subagent.steer", wantErr: `field "parent_agent_id": required`},
		{name: "subagent.steer without target", rec: `{"type":"subagent.steer","parent_agent_id":"p","message":"m"}`, wantTyp: "subagent.steer", wantErr: `field "target": required`},
		{name: "subagent.steer without message", rec: `{"type":"subagent.steer","parent_agent_id":"p","target":"t"}`, wantTyp: "subagent.steer", wantErr: `field "message": required`},
		{name: "subagent.relaunch without parent", rec: `{"type":"subagent.relaunch","target":"t","task":"x"}`, wantTyp: "subagent.relaunch", wantErr: `field "parent_agent_id": required`},
		{name: "subagent.relaunch without target", rec: `{"type":"subagent.relaunch","parent_agent_id":"p","task":"x"}`, wantTyp: "subagent.relaunch", wantErr: `field "target": required`},
		{name: "subagent.relaunch without task", rec: `{"type":"subagent.relaunch","parent_agent_id":"p","target":"t"}`, wantTyp: "subagent.relaunch", wantErr: `field "task": required`},
		{name: "subagent.status without parent", rec: `{"type":"subagent.status"}`, wantTyp: "subagent.status", wantErr: `field "parent_agent_id": required`},
		{name: "subagent.stop without parent", rec: `{"type":"subagent.stop","handle":"h"}`, wantTyp: "subagent.stop", wantErr: `field "parent_agent_id": required`},
		{name: "subagent.stop without handle", rec: `{"type":"subagent.stop","parent_agent_id":"p"}`, wantTyp: "subagent.stop", wantErr: `field "handle": required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd, h, err := protocol.DecodeCommand([]byte(tt.rec))
			if cmd != nil {
				t.Errorf("command = %#v, want nil", cmd)
			}
			if h.ID != tt.wantID || h.Type != tt.wantTyp {
				t.Errorf("header = %+v, want id %q type %q", h, tt.wantID, tt.wantTyp)
			}
			checkErr(t, err, tt.wantErr)
			// The error response built from it is well formed and keeps the id.
			resp := decodeJSONObject(t, protocol.NewErrorResponse(h.ID, h.Type, err))
			if _, has := resp["id"]; has != (tt.wantID != "") {
				t.Errorf("response id presence = %v, want %v: %v", has, tt.wantID != "", resp)
			}
			if e, _ := resp["error"].(map[string]any); e["code"] != "INVALID_REQUEST" {
				t.Errorf("response error = %v", resp["error"])
			}
		})
	}
}

func TestDecodeCommandValid(t *testing.T) {
	t.Parallel()
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	intp := func(v int) *int { return &v }
	hdr := func(typ, id, agent string) protocol.Header { return protocol.Header{Type: typ, ID: id, AgentID: agent} }
	tests := []struct {
		name string
		rec  string
		want protocol.Command
	}{
		{"prompt", `{"id":"r1","type":"prompt","agent_id":"a-3","message":"read the config","streaming_behavior":"follow_up"}`,
			&protocol.Prompt{Header: hdr("prompt", "r1", "a-3"), Message: "read the config", StreamingBehavior: "follow_up"}},
		{"prompt with images only", `{"type":"prompt","images":[{"type":"image","data":"iVBORw0KGgo=","mime_type":"image/png"}]}`,
			&protocol.Prompt{Header: hdr("prompt", "", ""), Images: []protocol.Image{{Type: "image", Data: "iVBORw0KGgo=", MimeType: "image/png"}}}},
		{"prompt unknown fields ignored", `{"type":"prompt","message":"x","future":{"a":1}}`,
			&protocol.Prompt{Header: hdr("prompt", "", ""), Message: "x"}},
		{"prompt with raw U+2028", "{\"type\":\"prompt\",\"message\":\"a\u2028b\"}",
			&protocol.Prompt{Header: hdr("prompt", "", ""), Message: "a\u2028b"}},
		{"steer", `{"type":"steer","message":"stop that"}`, &protocol.Steer{Header: hdr("steer", "", ""), Message: "stop that"}},
		{"abort", `{"id":"x","type":"abort"}`, &protocol.Abort{Header: hdr("abort", "x", "")}},
		{"set_mode", `{"type":"set_mode","mode":"plan"}`, &protocol.SetMode{Header: hdr("set_mode", "", ""), Mode: "plan"}},
		{"list_modes", `{"type":"list_modes"}`, &protocol.ListModes{Header: hdr("list_modes", "", "")}},
		{"list_models", `{"type":"list_models"}`, &protocol.ListModels{Header: hdr("list_models", "", "")}},
		{"set_model", `{"type":"set_model","model":"m"}`, &protocol.SetModel{Header: hdr("set_model", "", ""), Model: "m"}},
		{"list_reasoning_levels", `{"type":"list_reasoning_levels"}`, &protocol.ListReasoningLevels{Header: hdr("list_reasoning_levels", "", "")}},
		{"set_reasoning_level", `{"type":"set_reasoning_level","model":"m","effort":"high"}`, &protocol.SetReasoningLevel{Header: hdr("set_reasoning_level", "", ""), Model: "m", Effort: "high"}},
		{"session_op list", `{"type":"session_op","op":"list"}`, &protocol.SessionOp{Header: hdr("session_op", "", ""), Op: "list"}},
		{"session_op compact", `{"type":"session_op","op":"compact","args":{"keep_recent_tokens":2000}}`,
			&protocol.SessionOp{Header: hdr("session_op", "", ""), Op: "compact", Args: &protocol.SessionOpArgs{KeepRecentTokens: i64(2000)}}},
		{"session_op compact default", `{"type":"session_op","op":"compact"}`, &protocol.SessionOp{Header: hdr("session_op", "", ""), Op: "compact"}},
		{"session_op fork", `{"type":"session_op","op":"fork","args":{"from_entry_id":"e1"}}`,
			&protocol.SessionOp{Header: hdr("session_op", "", ""), Op: "fork", Args: &protocol.SessionOpArgs{FromEntryID: "e1"}}},
		{"permission_response decision", `{"type":"permission_response","agent_id":"a-3","request_id":"req-7","decision":"allow_always"}`,
			&protocol.PermissionResponse{Header: hdr("permission_response", "", "a-3"), RequestID: "req-7", Decision: "allow_always"}},
		{"permission_response choice", `{"type":"permission_response","request_id":"req-7","choice_id":"c1","reason":"ok"}`,
			&protocol.PermissionResponse{Header: hdr("permission_response", "", ""), RequestID: "req-7", ChoiceID: "c1", Reason: "ok"}},
		{"ui_response string", `{"type":"ui_response","request_id":"u1","value":"yes"}`,
			&protocol.UIResponse{Header: hdr("ui_response", "", ""), RequestID: "u1", Value: json.RawMessage(`"yes"`)}},
		{"ui_response strings", `{"type":"ui_response","request_id":"u1","value":["a","b"]}`,
			&protocol.UIResponse{Header: hdr("ui_response", "", ""), RequestID: "u1", Value: json.RawMessage(`["a","b"]`)}},
		{"ui_response empty list", `{"type":"ui_response","request_id":"u1","value":[]}`,
			&protocol.UIResponse{Header: hdr("ui_response", "", ""), RequestID: "u1", Value: json.RawMessage(`[]`)}},
		{"ui_response null", `{"type":"ui_response","request_id":"u1","value":null}`,
			&protocol.UIResponse{Header: hdr("ui_response", "", ""), RequestID: "u1", Value: json.RawMessage(`null`)}},
		{"get_sync", `{"id":"s1","type":"get_sync"}`, &protocol.GetSync{Header: hdr("get_sync", "s1", "")}},
		{"agent.list", `{"id":"l1","type":"agent.list"}`, &protocol.AgentList{Header: hdr("agent.list", "l1", "")}},
		{"agent.list paged", `{"id":"l1","type":"agent.list","active":true,"parent_agent_id":"agent-1","since_ms":5,"limit":2,"cursor":"YS4xLmFnZW50LTE"}`,
			&protocol.AgentList{Header: hdr("agent.list", "l1", ""), Active: true, ParentAgentID: "agent-1", SinceMs: 5, Limit: 2, Cursor: "YS4xLmFnZW50LTE"}},
		{"agent.create", `{"type":"agent.create","cwd":"/w","headless_policy":"queue","mode":"plan","name":"n","tools":["read"]}`,
			&protocol.AgentCreate{Header: hdr("agent.create", "", ""), Cwd: "/w", HeadlessPolicy: "queue", Mode: "plan", Name: "n", Tools: []string{"read"}}},
		{"agent.attach", `{"id":"r1","type":"agent.attach","agent_id":"a-3","role":"observer"}`,
			&protocol.AgentAttach{Header: hdr("agent.attach", "r1", "a-3"), Role: "observer"}},
		{"agent.detach", `{"id":"r2","type":"agent.detach","agent_id":"a-3"}`, &protocol.AgentDetach{Header: hdr("agent.detach", "r2", "a-3")}},
		{"agent.terminate", `{"type":"agent.terminate","agent_id":"a-3"}`, &protocol.AgentTerminate{Header: hdr("agent.terminate", "", "a-3")}},
		{"agent.kill", `{"type":"agent.kill","agent_id":"a-3","force":true}`, &protocol.AgentKill{Header: hdr("agent.kill", "", "a-3"), Force: true}},
		{"agent.remove", `{"type":"agent.remove","agent_ids":["a-3","a-4"]}`, &protocol.AgentRemove{Header: hdr("agent.remove", "", ""), AgentIDs: []string{"a-3", "a-4"}}},
		{"agent.update", `{"type":"agent.update","agent_id":"a-3","title":""}`, &protocol.AgentUpdate{Header: hdr("agent.update", "", "a-3"), Title: new(string)}},
		{"agent.status all", `{"type":"agent.status"}`, &protocol.AgentStatusCmd{Header: hdr("agent.status", "", "")}},
		{"daemon.shutdown", `{"type":"daemon.shutdown","force":true}`, &protocol.DaemonShutdown{Header: hdr("daemon.shutdown", "", ""), Force: true}},
		{"ws.ticket", `{"type":"ws.ticket"}`, &protocol.WSTicket{Header: hdr("ws.ticket", "", "")}},
		{"daemon.status", `{"type":"daemon.status"}`, &protocol.DaemonStatus{Header: hdr("daemon.status", "", "")}},
		{"cluster.status", `{"type":"cluster.status"}`, &protocol.ClusterStatus{Header: hdr("cluster.status", "", "")}},
		{"workspace.create", `{"type":"workspace.create","version":1,"cwd":"/r","branch":"b"}`,
			&protocol.WorkspaceCreate{Header: hdr("workspace.create", "", ""), Version: intp(1), Cwd: "/r", Branch: "b"}},
		{"workspace.attach", `{"type":"workspace.attach","workspace_id":"w"}`, &protocol.WorkspaceAttach{Header: hdr("workspace.attach", "", ""), WorkspaceID: "w"}},
		{"workspace.list", `{"type":"workspace.list","include_retired":true}`, &protocol.WorkspaceList{Header: hdr("workspace.list", "", ""), IncludeRetired: true}},
		{"workspace.status", `{"type":"workspace.status","workspace_id":"w"}`, &protocol.WorkspaceStatus{Header: hdr("workspace.status", "", ""), WorkspaceID: "w"}},
		{"workspace.retire", `{"type":"workspace.retire","workspace_id":"w","branch_disposition":"keep"}`,
			&protocol.WorkspaceRetire{Header: hdr("workspace.retire", "", ""), WorkspaceID: "w", BranchDisposition: "keep"}},
		{"workspace.diff", `{"type":"workspace.diff","workspace_id":"w","max_bytes":65536}`,
			&protocol.WorkspaceDiff{Header: hdr("workspace.diff", "", ""), WorkspaceID: "w", MaxBytes: i64(65536)}},
		{"workspace.merge", `{"type":"workspace.merge","workspace_id":"w","strategy":"squash","message":"m"}`,
			&protocol.WorkspaceMerge{Header: hdr("workspace.merge", "", ""), WorkspaceID: "w", Strategy: protocol.MergeSquash, Message: "m"}},
		{"subagent.create single", `{"id":"c","type":"subagent.create","parent_agent_id":"p","name":"n","task":"t"}`,
			&protocol.SubagentCreate{Header: hdr("subagent.create", "c", ""), ParentAgentID: "p", Name: "n", Task: "t"}},
		{"subagent.create single explicit", `{"type":"subagent.create","parent_agent_id":"p","name":"n","task":"t","strategy":"single"}`,
			&protocol.SubagentCreate{Header: hdr("subagent.create", "", ""), ParentAgentID: "p", Name: "n", Task: "t", Strategy: protocol.StrategySingle}},
		{"subagent.create batch", `{"type":"subagent.create","parent_agent_id":"p","tasks":[{"name":"a","task":"x"},{"name":"b","task":"y"}],"strategy":"chain"}`,
			&protocol.SubagentCreate{Header: hdr("subagent.create", "", ""), ParentAgentID: "p", Tasks: []protocol.TaskSpec{{Name: "a", Task: "x"}, {Name: "b", Task: "y"}}, Strategy: protocol.StrategyChain}},
		{"subagent.create isolated", `{"type":"subagent.create","parent_agent_id":"p","name":"n","task":"t","isolation":"workspace"}`,
			&protocol.SubagentCreate{Header: hdr("subagent.create", "", ""), ParentAgentID: "p", Name: "n", Task: "t", Isolation: protocol.IsolationWorkspace}},
		{"subagent.wait poll", `{"type":"subagent.wait","parent_agent_id":"p","handles":["job-1"],"mode":"any","timeout":0}`,
			&protocol.SubagentWait{Header: hdr("subagent.wait", "", ""), ParentAgentID: "p", Handles: []string{"job-1"}, Mode: "any", Timeout: f64(0)}},
		{"subagent.wait forever", `{"type":"subagent.wait","parent_agent_id":"p","handles":["a","b"]}`,
			&protocol.SubagentWait{Header: hdr("subagent.wait", "", ""), ParentAgentID: "p", Handles: []string{"a", "b"}}},
		{"subagent.steer", `{"type":"subagent.steer","parent_agent_id":"p","target":"t","message":"m"}`,
			&protocol.SubagentSteer{Header: hdr("subagent.steer", "", ""), ParentAgentID: "p", Target: "t", Message: "m"}},
		{"subagent.relaunch", `{"type":"subagent.relaunch","parent_agent_id":"p","target":"t","task":"x"}`,
			&protocol.SubagentRelaunch{Header: hdr("subagent.relaunch", "", ""), ParentAgentID: "p", Target: "t", Task: "x"}},
		{"subagent.status", `{"type":"subagent.status","parent_agent_id":"p","targets":["x"]}`,
			&protocol.SubagentStatus{Header: hdr("subagent.status", "", ""), ParentAgentID: "p", Targets: []string{"x"}}},
		{"subagent.stop", `{"type":"subagent.stop","parent_agent_id":"p","handle":"job-1"}`,
			&protocol.SubagentStop{Header: hdr("subagent.stop", "", ""), ParentAgentID: "p", Handle: "job-1"}},
	}
	zero := map[string]protocol.Typed{}
	for _, c := range zeroCommands() {
		zero[c.Head().Type] = c
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.want.Head().Type] = true
		if z := zero[tt.want.Head().Type]; reflect.TypeOf(z) != reflect.TypeOf(tt.want) {
			t.Errorf("%s: zeroCommands has %T, want %T", tt.name, z, tt.want)
		}
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd, h, err := protocol.DecodeCommand([]byte(tt.rec))
			if err != nil {
				t.Fatalf("DecodeCommand: %v", err)
			}
			if !reflect.DeepEqual(cmd, tt.want) {
				t.Errorf("command = %#v\nwant      %#v", cmd, tt.want)
			}
			if h != *tt.want.Head() {
				t.Errorf("header = %+v, want %+v", h, *tt.want.Head())
			}
			// Re-encoding and decoding again gives the same command.
			again, _, err := protocol.DecodeCommand(protocol.MustMarshal(cmd))
			if err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			if !reflect.DeepEqual(again, tt.want) {
				t.Errorf("re-decoded = %#v\nwant         %#v", again, tt.want)
			}
		})
	}
	for _, typ := range commandTypes {
		if !seen[typ] {
			t.Errorf("no valid-decode case for command %q", typ)
		}
	}
}

// commandTypes is every command type with its scope.
var commandTypes = []string{
	protocol.TypePrompt, protocol.TypeSteer, protocol.TypeAbort, protocol.TypeSetMode,
	protocol.TypeListModes, protocol.TypeListModels, protocol.TypeSetModel,
	protocol.TypeListReasoningLevels, protocol.TypeSetReasoningLevel, protocol.TypeSessionOp,
	protocol.TypePermissionResponse, protocol.TypeUIResponse, protocol.TypeGetSync,
	protocol.TypeAgentList, protocol.TypeAgentCreate, protocol.TypeAgentAttach,
	protocol.TypeAgentDetach, protocol.TypeAgentTerminate, protocol.TypeAgentKill,
	protocol.TypeAgentStatus, protocol.TypeDaemonShutdown, protocol.TypeWSTicket,
	protocol.TypeDaemonStatus, protocol.TypeAgentRemove, protocol.TypeAgentUpdate, protocol.TypeWorkspaceCreate, protocol.TypeWorkspaceAttach,
	protocol.TypeWorkspaceList, protocol.TypeWorkspaceStatus, protocol.TypeWorkspaceRetire,
	protocol.TypeWorkspaceDiff, protocol.TypeWorkspaceMerge,
	protocol.TypeSubagentCreate, protocol.TypeSubagentWait, protocol.TypeSubagentSteer,
	protocol.TypeSubagentRelaunch, protocol.TypeSubagentStatus, protocol.TypeSubagentStop,
	protocol.TypeClusterStatus,
}

func TestCommandScope(t *testing.T) {
	t.Parallel()
	want := map[string]protocol.Scope{
		"prompt": protocol.ScopeAgent, "steer": protocol.ScopeAgent, "abort": protocol.ScopeAgent,
		"set_mode": protocol.ScopeAgent, "list_modes": protocol.ScopeAgent, "list_models": protocol.ScopeAgent,
		"set_model": protocol.ScopeAgent, "list_reasoning_levels": protocol.ScopeAgent,
		"set_reasoning_level": protocol.ScopeAgent, "session_op": protocol.ScopeAgent,
		"permission_response": protocol.ScopeAgent, "ui_response": protocol.ScopeAgent, "get_sync": protocol.ScopeAgent,

		"agent.list": protocol.ScopeOrchestrator, "agent.create": protocol.ScopeOrchestrator,
		"agent.attach": protocol.ScopeOrchestrator, "agent.detach": protocol.ScopeOrchestrator,
		"agent.terminate": protocol.ScopeOrchestrator, "agent.kill": protocol.ScopeOrchestrator,
		"agent.status": protocol.ScopeOrchestrator, "daemon.shutdown": protocol.ScopeOrchestrator,
		"ws.ticket": protocol.ScopeOrchestrator, "daemon.status": protocol.ScopeOrchestrator,
		"workspace.create": protocol.ScopeOrchestrator, "workspace.attach": protocol.ScopeOrchestrator,
		"workspace.list": protocol.ScopeOrchestrator, "workspace.status": protocol.ScopeOrchestrator,
		"workspace.retire": protocol.ScopeOrchestrator, "workspace.diff": protocol.ScopeOrchestrator,
		"workspace.merge": protocol.ScopeOrchestrator, "subagent.create": protocol.ScopeOrchestrator,
		"subagent.wait": protocol.ScopeOrchestrator, "subagent.steer": protocol.ScopeOrchestrator,
		"subagent.relaunch": protocol.ScopeOrchestrator, "subagent.status": protocol.ScopeOrchestrator,
		"subagent.stop": protocol.ScopeOrchestrator, "agent.remove": protocol.ScopeOrchestrator,
		"agent.update": protocol.ScopeOrchestrator, "cluster.status": protocol.ScopeOrchestrator,

		// Not commands.
		"": protocol.ScopeUnknown, "bogus": protocol.ScopeUnknown, "agent.bogus": protocol.ScopeUnknown,
		"status": protocol.ScopeUnknown, "response": protocol.ScopeUnknown, "agent_spawned": protocol.ScopeUnknown,
		"Prompt": protocol.ScopeUnknown, "workspace.bogus": protocol.ScopeUnknown,
		"workspace_created": protocol.ScopeUnknown,
	}
	if got, wantN := len(commandTypes), 39; got != wantN {
		t.Fatalf("commandTypes has %d entries, want %d", got, wantN)
	}
	for _, typ := range commandTypes {
		if _, ok := want[typ]; !ok {
			t.Errorf("command %q missing from the scope table", typ)
		}
	}
	for typ, w := range want {
		if got := protocol.CommandScope(typ); got != w {
			t.Errorf("CommandScope(%q) = %d, want %d", typ, got, w)
		}
	}
}

func decodeJSONObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("invalid JSON object %q: %v", b, err)
	}
	return m
}

// TestDecodeJobsListPaged: jobs.list carries limit and cursor; a cursor the
// daemon minted decodes to the key it names.
func TestDecodeJobsListPaged(t *testing.T) {
	t.Parallel()
	cur := protocol.Cursor{Kind: protocol.CursorJobs, ID: "job-01"}.Encode()
	cmd, _, err := protocol.DecodeCommand([]byte(`{"type":"jobs.list","limit":2,"cursor":"` + cur + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &protocol.JobsList{Header: protocol.Header{Type: "jobs.list"}, Limit: 2, Cursor: cur}
	if !reflect.DeepEqual(cmd, want) {
		t.Fatalf("command = %#v, want %#v", cmd, want)
	}
	got, err := protocol.DecodeCursor(protocol.CursorJobs, cur)
	if err != nil || got.ID != "job-01" || got.At != 0 {
		t.Fatalf("DecodeCursor = %+v, %v", got, err)
	}
}

// TestSubagentParent: every subagent.* command names its parent, and no
// other command does (the jobs and the gateway's routing both read it).
func TestSubagentParent(t *testing.T) {
	t.Parallel()
	for _, cmd := range []protocol.Command{
		&protocol.SubagentCreate{ParentAgentID: "agent-p"},
		&protocol.SubagentWait{ParentAgentID: "agent-p"},
		&protocol.SubagentSteer{ParentAgentID: "agent-p"},
		&protocol.SubagentRelaunch{ParentAgentID: "agent-p"},
		&protocol.SubagentStatus{ParentAgentID: "agent-p"},
		&protocol.SubagentStop{ParentAgentID: "agent-p"},
	} {
		if got := protocol.SubagentParent(cmd); got != "agent-p" {
			t.Errorf("SubagentParent(%T) = %q, want agent-p", cmd, got)
		}
	}
	if got := protocol.SubagentParent(&protocol.JobsList{}); got != "" {
		t.Errorf("SubagentParent(jobs.list) = %q, want none", got)
	}
}
