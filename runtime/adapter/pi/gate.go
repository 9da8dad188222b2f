package pi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/shard-dev/shard/runtime/adapter"
)

// gateTitle prefixes the title of the gate's select dialog; the JSON of
// the call follows it. pi's extension_ui_request carries no toolCallId,
// so the gate puts the call in the title for the adapter to correlate.
const gateTitle = "shard-permission "

// Gate choices: the select's options, and the Ask options they map to.
const (
	gateAllow = "allow"
	gateDeny  = "deny"
	// gateDenyReason prefixes the answer to the gate's select that denies
	// with the person's reason after it: the gate blocks the call with
	// that reason, which is what the model sees.
	gateDenyReason = "deny\n"
)

// gateSource is the pi extension the adapter loads with --extension: pi
// has no permission prompts of its own, so before every tool call (its
// tool_call event, which can block) it asks through ctx.ui.select, which
// RPC mode turns into an extension_ui_request to the adapter. Anything but
// "allow" (deny, a cancelled dialog, no UI) blocks the call. Plain
// JavaScript: pi loads it with jiti and needs no type imports.
const gateSource = `// Written by shardd's pi adapter: asks the adapter before each tool call.
export default function (pi) {
  pi.on("tool_call", async (event, ctx) => {
    if (!ctx.hasUI) return { block: true, reason: "No one to ask for permission" };
    const call = JSON.stringify({ toolCallId: event.toolCallId, toolName: event.toolName, input: event.input });
    const choice = await ctx.ui.select("` + gateTitle + `" + call, ["` + gateAllow + `", "` + gateDeny + `"]);
    if (choice === "` + gateAllow + `") return undefined;
    if (typeof choice === "string" && choice.startsWith("deny\n")) {
      return { block: true, reason: "Permission denied; the person's reason: " + choice.slice(5) };
    }
    return { block: true, reason: choice === undefined ? "Permission request cancelled" : "Permission denied" };
  });
}
`

// writeGate writes the gate extension into a new temporary directory and
// returns the file and the directory to remove once pi is gone.
func writeGate() (file, dir string, err error) {
	dir, err = os.MkdirTemp("", "shard-pi-gate-")
	if err != nil {
		return "", "", err
	}
	file = filepath.Join(dir, "shard-permission-gate.js")
	if err := os.WriteFile(file, []byte(gateSource), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", err
	}
	return file, dir, nil
}

// uiRequest is the part of pi's extension_ui_request the adapter reads.
type uiRequest struct {
	ID     string `json:"id"`
	Method string `json:"method"`
	Title  string `json:"title"`
}

// dialog reports whether method blocks pi until answered (the others are
// fire-and-forget and get no response).
func dialog(method string) bool {
	switch method {
	case "select", "confirm", "input", "editor":
		return true
	}
	return false
}

// uiRequest answers an extension_ui_request. The gate's select becomes an
// Ask through the Host's permission path (fan-out, first response wins,
// headless policy, abort); it runs in a goroutine of the backend, whose
// context ends when pi exits or the backend closes, so the reader keeps
// reading. Any other dialog (another extension's) is dismissed at
// once so pi never waits on it; fire-and-forget methods are ignored.
func (b *Backend) uiRequest(r uiRequest) {
	if !dialog(r.Method) || r.ID == "" {
		return
	}
	call, ok := strings.CutPrefix(r.Title, gateTitle)
	if r.Method != "select" || !ok {
		b.answerUI(r.ID, nil)
		return
	}
	var c struct {
		ToolCallID string         `json:"toolCallId"`
		ToolName   string         `json:"toolName"`
		Input      map[string]any `json:"input"`
	}
	if err := json.Unmarshal([]byte(call), &c); err != nil {
		b.ev.ProtocolError("a permission request of the gate extension that is not JSON")
		b.answerUI(r.ID, nil)
		return
	}
	b.calls.Go(func() { // refused once Close began: pi is gone
		ans := b.ev.Ask(b.life, adapter.Ask{
			Tool: adapter.Tool{ID: c.ToolCallID, Name: c.ToolName, Title: c.ToolName, Args: c.Input,
				ReadOnly: readOnly(c.ToolName), Status: adapter.ToolPending},
			Options: []adapter.Option{{ID: gateAllow, Name: "Allow", Kind: adapter.AllowOnce}, {ID: gateDeny, Name: "Deny", Kind: adapter.RejectOnce}},
		})
		if ans.Cancelled || ans.OptionID == "" {
			b.answerUI(r.ID, nil)
			return
		}
		v := ans.OptionID
		if v == gateDeny && ans.Reason != "" {
			v = gateDenyReason + ans.Reason
		}
		if v == gateAllow {
			b.ev.ToolCall(adapter.Tool{ID: c.ToolCallID, Name: c.ToolName, Title: c.ToolName, Args: c.Input,
				ReadOnly: readOnly(c.ToolName), Status: adapter.ToolInProgress})
		}
		b.answerUI(r.ID, &v)
	})
}

// answerUI sends extension_ui_response: the chosen value, or (nil)
// cancelled, which pi's select resolves as undefined.
func (b *Backend) answerUI(id string, value *string) {
	resp := map[string]any{"type": "extension_ui_response", "id": id}
	if value != nil {
		resp["value"] = *value
	} else {
		resp["cancelled"] = true
	}
	if err := b.send(resp); err != nil {
		b.opts.Log.Warn("pi extension_ui_response", "err", err)
	}
}
