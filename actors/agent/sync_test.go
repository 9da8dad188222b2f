package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// getSync1000 is a get_sync response with a live window of 1,000 messages,
// encoded the way the runtime encodes it (protocol.Marshal of
// protocol.Response and protocol.Message): text, thinking, tool calls with
// JSON arguments and tool results, with the characters JSON encoders treat
// specially.
func getSync1000(t testing.TB) []byte {
	t.Helper()
	n := int64(42)
	msgs := make([]protocol.Message, 0, 1000)
	for i := range 500 {
		msgs = append(msgs, protocol.Message{ID: fmt.Sprintf("msg-%d-u", i), Role: "user",
			Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: fmt.Sprintf("ping %d <&> \"q\" é \u2028 \\", i)}}})
		blocks := []protocol.ContentBlock{{Type: protocol.BlockThinking, Text: "hmm"}, {Type: protocol.BlockText, Text: "You said: ping " + fmt.Sprint(i)}}
		if i%5 == 0 {
			blocks = append(blocks,
				protocol.ContentBlock{Type: protocol.BlockToolCall, ID: fmt.Sprint("tc-", i), Name: "read",
					Args: map[string]any{"path": "/tmp/x y", "n": 1.5e21, "opts": []any{true, nil, "z"}}},
				protocol.ContentBlock{Type: protocol.BlockToolResult, ToolCallID: fmt.Sprint("tc-", i),
					Content: &protocol.ToolResultContent{Kind: "json", Value: map[string]any{"lines": n, "ok": true}}})
		}
		msgs = append(msgs, protocol.Message{ID: fmt.Sprintf("msg-%d-a", i), Role: "assistant", Content: blocks})
	}
	data := protocol.GetSyncData{Status: protocol.StatusIdle, Mode: "build", Capabilities: []string{"streaming-deltas"},
		LiveWindow: protocol.LiveWindow{Messages: msgs}, PendingRequests: []json.RawMessage{}}
	return protocol.MustMarshal(protocol.Response{Header: protocol.Header{Type: protocol.TypeResponse, ID: "d-1"},
		Command: protocol.TypeGetSync, Success: true, Data: protocol.MustMarshal(data)})
}

func syncActor() *Actor {
	return &Actor{m: store.Agent{AgentID: "01J9ZAGENT"}, projection: projection{status: protocol.StatusIdle, mode: "build"},
		generation: generation{caps: []string{"streaming-deltas"}, epoch: 3}, requestState: requestState{foreign: map[string]*foreignRequest{}}}
}

// typedSyncRecord is how the sync record was built before the window
// stayed raw: decode the whole snapshot, encode a protocol.Sync.
func typedSyncRecord(a *Actor, data []byte) ([]byte, error) {
	var snap protocol.GetSyncData
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, err
	}
	epoch := a.epoch
	pending := make([]json.RawMessage, 0, len(snap.PendingRequests))
	for _, p := range snap.PendingRequests {
		pending = append(pending, protocol.WithAgentID(p, a.m.AgentID))
	}
	msgs := snap.LiveWindow.Messages
	if msgs == nil {
		msgs = []protocol.Message{}
	}
	return protocol.MustMarshal(protocol.Sync{
		Header: protocol.Header{Type: protocol.TypeSync, AgentID: a.m.AgentID}, Status: a.status, Mode: a.mode,
		Capabilities: a.caps, RuntimeEpoch: &epoch, PendingRequests: pending,
		LiveWindow: protocol.LiveWindow{Messages: msgs, CompactionIndex: snap.LiveWindow.CompactionIndex},
	}), nil
}

// TestSyncRecordIsTheTypedEncoding checks that relaying the window raw
// changes no byte of the sync record, for the windows runtimes write and
// for the odd ones that take the typed path.
func TestSyncRecordIsTheTypedEncoding(t *testing.T) {
	_, real, ok := protocol.CutSyncResponse(getSync1000(t))
	if !ok {
		t.Fatal("the response is not the canonical get_sync response")
	}
	msg := `{"id":"m1","role":"user","content":[{"type":"text","text":"a\u2028b <&> \"q\" é \\\\ end"}]}`
	perm := `{"type":"permission_request","request_id":"r1","tool":"bash","options":["allow","deny"]}`
	cases := map[string]string{
		"real window":      string(real),
		"empty":            `{"status":"idle","mode":"build","live_window":{"messages":[]},"pending_requests":[]}`,
		"missing messages": `{"status":"idle","mode":"build","live_window":{},"pending_requests":null}`,
		"null messages":    `{"status":"idle","mode":"build","live_window":{"messages":null}}`,
		"null window":      `{"status":"idle","live_window":null}`,
		"no window":        `{"status":"streaming"}`,
		"compaction index": `{"status":"idle","mode":"plan","live_window":{"messages":[` + msg + `],"compaction_index":7}}`,
		"pending":          `{"status":"waiting_for_permission","live_window":{"messages":[` + msg + `,` + msg + `]},"pending_requests":[` + perm + `]}`,
		"raw separators":   `{"status":"idle","live_window":{"messages":[{"id":"m","role":"user","content":[{"type":"text","text":"x` + "\u2028\u2029" + `y"}]}]}}`,
		"whitespace":       `{"status":"idle","live_window":{"messages":[ {"id":"m", "role":"user","content":[]} ]}}`,
		"null element":     `{"status":"idle","live_window":{"messages":[null,` + msg + `]}}`,
		"nested arrays":    `{"status":"idle","live_window":{"messages":[{"id":"m","role":"user","content":[{"type":"tool_call","id":"t","name":"x","args":{"a":[1,[2,{"b":"]"}]]}}]}]}}`,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			a := syncActor()
			want, err := typedSyncRecord(a, []byte(data))
			if err != nil {
				t.Fatalf("typed decode: %v", err)
			}
			snap, err := decodeSnapshot([]byte(data))
			if err != nil {
				t.Fatalf("decodeSnapshot: %v", err)
			}
			if got := a.syncRecord(snap); !bytes.Equal(got, want) {
				t.Errorf("sync record differs\n got %.300s\nwant %.300s", got, want)
			}
		})
	}
}

// TestSyncRecordRefusesWhatTypedRefuses: a snapshot the typed decoding
// refuses is refused (and the attach fails) as before.
func TestSyncRecordRefusesWhatTypedRefuses(t *testing.T) {
	for _, data := range []string{
		`{"status":5}`,
		`{"live_window":{"messages":{}}}`,
		`{"live_window":{"messages":[1,2]}}`,
		`{"live_window":{"messages":["m"]}}`,
		`{"live_window":{"messages":[[]]}}`,
		`{"live_window":{"compaction_index":"x","messages":[]}}`,
		`{"pending_requests":{}}`,
		`[]`,
	} {
		if _, err := decodeSnapshot([]byte(data)); err == nil {
			t.Errorf("decodeSnapshot(%s) succeeded", data)
		}
		var typed protocol.GetSyncData
		if json.Unmarshal([]byte(data), &typed) == nil {
			t.Errorf("test case %s: the typed decoding accepts it", data)
		}
	}
}

// TestSyncFastLeavesTrailingMembers: members after data are cut into data
// (protocol.CutSyncResponse), which then is not one JSON value:
// decodeSnapshot fails with a syntax error, so onSyncFast leaves such a
// record to the general path. (The scanners' own tables are in protocol.)
func TestSyncFastLeavesTrailingMembers(t *testing.T) {
	_, data, ok := protocol.CutSyncResponse([]byte(`{"type":"response","id":"d-7","command":"get_sync","success":true,"data":{},"error":{}}`))
	var syntax *json.SyntaxError
	if _, err := decodeSnapshot(data); ok && !errors.As(err, &syntax) {
		t.Errorf("data %s: decodeSnapshot error %v, want a syntax error", data, err)
	}
}

// BenchmarkSyncRecord: a get_sync response with a 1,000-message window to
// the sync record, the way the agent does it (raw) and the way it did
// (typed: decode the response, decode the snapshot, encode protocol.Sync).
func BenchmarkSyncRecord(b *testing.B) {
	line := getSync1000(b)
	b.Run("raw", func(b *testing.B) {
		a := syncActor()
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			_, data, _ := protocol.CutSyncResponse(line)
			snap, err := decodeSnapshot(data)
			if err != nil {
				b.Fatal(err)
			}
			a.syncRecord(snap)
		}
	})
	b.Run("typed", func(b *testing.B) {
		a := syncActor()
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			var resp protocol.Response
			if err := json.Unmarshal(line, &resp); err != nil {
				b.Fatal(err)
			}
			if _, err := typedSyncRecord(a, resp.Data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
