package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// A minimal ACP agent played by this test binary (TestMain runs it when
// fakeACPEnv is set): it answers initialize, session/new and
// session/prompt over JSON-RPC on stdio, the Agent Client Protocol's
// framing, and says in its answer what the prompt held ("text=… images=N
// mime=…"), so a test over the wire sees what reached the agent. With
// fakeACPImagesEnv=1 it advertises promptCapabilities.image, otherwise not.
const (
	fakeACPEnv       = "SHARD_TEST_FAKE_ACP"
	fakeACPImagesEnv = "SHARD_TEST_FAKE_ACP_IMAGES"
)

// runFakeACP serves one ACP connection on stdin/stdout until stdin ends.
func runFakeACP() {
	images := os.Getenv(fakeACPImagesEnv) == "1"
	out := json.NewEncoder(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
				Prompt    []struct {
					Type     string `json:"type"`
					Text     string `json:"text"`
					MimeType string `json:"mimeType"`
					Data     string `json:"data"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
			continue // notifications (session/cancel) and answers
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{
				"loadSession": false, "promptCapabilities": map[string]any{"image": images}}}
		case "session/new":
			result = map[string]any{"sessionId": "fake-session"}
		case "session/prompt":
			var text []string
			n, mimes := 0, []string{}
			for _, b := range req.Params.Prompt {
				switch b.Type {
				case "text":
					text = append(text, b.Text)
				case "image":
					n++
					mimes = append(mimes, fmt.Sprintf("%s/%d", b.MimeType, len(b.Data)))
				}
			}
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
				"sessionId": req.Params.SessionID,
				"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{
					"type": "text", "text": fmt.Sprintf("text=%s images=%d mime=%s", strings.Join(text, "|"), n, strings.Join(mimes, ","))}},
			}})
			result = map[string]any{"stopReason": "end_turn"}
		default:
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			continue
		}
		_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
}
