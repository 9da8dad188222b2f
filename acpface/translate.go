package acpface

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/shard-dev/shard/protocol"
)

// The JSON-RPC error codes the face answers with: ACP's own for an unknown
// session (resource not found), JSON-RPC's for the rest.
const (
	rpcInvalidParams    = -32602
	rpcInternal         = -32603
	rpcResourceNotFound = -32002
)

// rpcError turns a daemon refusal into the JSON-RPC error an editor shows:
// NOT_FOUND (an unknown session, mode or model) is ACP's "resource not
// found", INVALID_REQUEST and UNSUPPORTED are invalid params, every other
// code an internal error. The message keeps the daemon's code and words;
// data carries the code for a client that branches on it. A failure that
// is not a refusal (the connection to the daemon ended) is an internal
// error saying so.
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return &acp.RequestError{Code: rpcInternal, Message: "shard: " + err.Error()}
	}
	code := rpcInternal
	switch pe.Code {
	case protocol.CodeNotFound:
		code = rpcResourceNotFound
	case protocol.CodeInvalidRequest, protocol.CodeUnsupported:
		code = rpcInvalidParams
	}
	return &acp.RequestError{
		Code:    code,
		Message: fmt.Sprintf("shard: %s: %s", pe.Code, pe.Message),
		Data:    map[string]any{"shard_code": string(pe.Code)},
	}
}

// invalidParams is the error for a request the face refuses itself.
func invalidParams(format string, a ...any) error {
	return &acp.RequestError{Code: rpcInvalidParams, Message: fmt.Sprintf(format, a...)}
}

// unknownSession is the error for a sessionId this face has not opened.
func unknownSession(id acp.SessionId) error {
	return &acp.RequestError{Code: rpcResourceNotFound,
		Message: fmt.Sprintf("session %s is not open in this connection: session/load or session/resume it first", id)}
}

// toolKind is the ACP kind of a tool call: the reference runtime's tools by
// name, a third-party agent's tools (which reach Shard named by their ACP
// kind, docs/protocol.md Appendix A) as themselves, others by read_only.
func toolKind(name string, readOnly *bool) acp.ToolKind {
	switch name {
	case "read":
		return acp.ToolKindRead
	case "ls", "grep", "find", "recall":
		return acp.ToolKindSearch
	case "write", "edit":
		return acp.ToolKindEdit
	case "bash":
		return acp.ToolKindExecute
	case "ask":
		return acp.ToolKindThink
	}
	switch k := acp.ToolKind(name); k {
	case acp.ToolKindRead, acp.ToolKindEdit, acp.ToolKindDelete, acp.ToolKindMove, acp.ToolKindSearch,
		acp.ToolKindExecute, acp.ToolKindThink, acp.ToolKindFetch, acp.ToolKindSwitchMode:
		return k
	}
	if readOnly != nil && *readOnly {
		return acp.ToolKindRead
	}
	return acp.ToolKindOther
}

// toolTitle is what an editor shows for a call: the tool's name and its
// main argument (the path, the command, the pattern), one line.
func toolTitle(name string, args map[string]any) string {
	for _, k := range []string{"command", "path", "pattern", "query", "title"} {
		if v, ok := args[k].(string); ok && v != "" {
			v, _, _ = strings.Cut(v, "\n")
			if len(v) > 120 {
				v = v[:120] + "…"
			}
			return name + " " + v
		}
	}
	return name
}

// absPath is p as an absolute path: the reference runtime's tools take
// paths relative to the agent's cwd, and ACP wants them absolute.
func absPath(cwd, p string) string {
	if p == "" || filepath.IsAbs(p) || cwd == "" {
		return p
	}
	return filepath.Join(cwd, p)
}

// toolLocations are the files a call touches, for an editor's follow-along.
func toolLocations(cwd string, args map[string]any) []acp.ToolCallLocation {
	p, _ := args["path"].(string)
	if p == "" {
		return nil
	}
	return []acp.ToolCallLocation{{Path: absPath(cwd, p)}}
}

// argsDiff is the diff an edit's arguments describe (old_string replaced by
// new_string in path): what a permission request and a replayed call show,
// which have no result to take it from.
func argsDiff(cwd, name string, args map[string]any) []acp.ToolCallContent {
	p, _ := args["path"].(string)
	if p == "" {
		return nil
	}
	switch name {
	case "edit":
		o, ok1 := args["old_string"].(string)
		n, ok2 := args["new_string"].(string)
		if ok1 && ok2 {
			return []acp.ToolCallContent{acp.ToolDiffContent(absPath(cwd, p), n, o)}
		}
	}
	return nil
}

// renderDiff rebuilds the ACP diff of a "diff" render descriptor (a tool
// result's unified hunks): oldText is the hunks' context and removed lines,
// newText their context and added lines. A change that creates the file
// (one hunk from line 0 with no old lines) has no oldText. The texts are the
// changed regions, not the whole file: the result carries only those.
func renderDiff(cwd string, r *protocol.RenderDescriptor) (acp.ToolCallContent, bool) {
	if r == nil || r.Kind != "diff" || r.Path == "" || len(r.Hunks) == 0 {
		return acp.ToolCallContent{}, false
	}
	var o, n strings.Builder
	created := len(r.Hunks) == 1 && r.Hunks[0].OldStart == 0 && r.Hunks[0].OldLines == 0
	for i, h := range r.Hunks {
		if i > 0 {
			o.WriteString("…\n")
			n.WriteString("…\n")
		}
		for _, l := range h.Lines {
			if l == "" {
				continue
			}
			body := l[1:] + "\n"
			switch l[0] {
			case ' ':
				o.WriteString(body)
				n.WriteString(body)
			case '-':
				o.WriteString(body)
			case '+':
				n.WriteString(body)
			}
		}
	}
	if created {
		return acp.ToolDiffContent(absPath(cwd, r.Path), n.String()), true
	}
	return acp.ToolDiffContent(absPath(cwd, r.Path), n.String(), o.String()), true
}

// resultText is a tool result's output as text.
func resultText(c *protocol.ToolResultContent) string {
	if c == nil {
		return ""
	}
	switch c.Kind {
	case "text":
		return c.Text
	case "error":
		return c.Message
	}
	if c.Value == nil {
		return ""
	}
	b, err := json.Marshal(c.Value)
	if err != nil {
		return ""
	}
	return string(b)
}

// resultContent is the ACP content of a tool result: its output as text,
// then the diff its render carries.
func resultContent(cwd string, c *protocol.ToolResultContent, render *protocol.RenderDescriptor) []acp.ToolCallContent {
	var out []acp.ToolCallContent
	if t := resultText(c); t != "" {
		out = append(out, acp.ToolContent(acp.TextBlock(t)))
	}
	if d, ok := renderDiff(cwd, render); ok {
		out = append(out, d)
	}
	return out
}

// Option ids of the legacy decisions, for a permission request without
// choices.
const decisionPrefix = "decision:"

// permissionOptions maps a permission request's answers to ACP options:
// each server-defined choice by its intent (allow → allow_once, persist →
// allow_always, deny → reject_once), its id as the optionId; a request
// without choices offers its legacy options the same way. ACP's
// reject_always has no Shard counterpart and is never offered.
func permissionOptions(req *protocol.PermissionRequest) []acp.PermissionOption {
	var out []acp.PermissionOption
	if len(req.Choices) > 0 {
		for _, c := range req.Choices {
			kind := acp.PermissionOptionKindAllowOnce
			switch c.Intent {
			case "persist":
				kind = acp.PermissionOptionKindAllowAlways
			case "deny":
				kind = acp.PermissionOptionKindRejectOnce
			}
			out = append(out, acp.PermissionOption{OptionId: acp.PermissionOptionId(c.ID), Name: c.Label, Kind: kind})
		}
		return out
	}
	opts := req.Options
	if len(opts) == 0 {
		opts = []string{protocol.DecisionAllow, protocol.DecisionAllowAlways, protocol.DecisionDeny}
	}
	for _, d := range opts {
		kind, name := acp.PermissionOptionKindAllowOnce, "Allow"
		switch d {
		case protocol.DecisionAllowAlways:
			kind, name = acp.PermissionOptionKindAllowAlways, "Always allow"
		case protocol.DecisionDeny:
			kind, name = acp.PermissionOptionKindRejectOnce, "Deny"
		}
		out = append(out, acp.PermissionOption{OptionId: acp.PermissionOptionId(decisionPrefix + d), Name: name, Kind: kind})
	}
	return out
}

// permissionAnswer is the permission_response for the option the editor
// picked; ok is false for an option the request did not offer.
func permissionAnswer(req *protocol.PermissionRequest, option acp.PermissionOptionId) (protocol.PermissionResponse, bool) {
	resp := protocol.PermissionResponse{
		Header:    protocol.Header{Type: protocol.TypePermissionResponse, AgentID: req.AgentID},
		RequestID: req.RequestID,
	}
	for _, o := range permissionOptions(req) {
		if o.OptionId != option {
			continue
		}
		if d, ok := strings.CutPrefix(string(option), decisionPrefix); ok && len(req.Choices) == 0 {
			resp.Decision = d
		} else {
			resp.ChoiceID = string(option)
		}
		return resp, true
	}
	return resp, false
}

// The option ids of a question asked through session/request_permission.
const (
	uiOptionPrefix = "answer:"
	uiDismiss      = "dismiss"
)

// questionOptions maps a ui_request the editor can answer with one pick to
// permission options (docs/protocol.md Appendix C): a select's options, a
// confirm's yes and no, each with a dismiss. Other kinds (input, editor, a
// select of several, a notify) have no ACP form and are left to the other
// clients: ok is false.
func questionOptions(ui *protocol.UIRequest) ([]acp.PermissionOption, bool) {
	var out []acp.PermissionOption
	switch {
	case ui.Kind == protocol.UISelect && !ui.Multiple && len(ui.Options) > 0:
		for _, o := range ui.Options {
			out = append(out, acp.PermissionOption{OptionId: acp.PermissionOptionId(uiOptionPrefix + o), Name: o, Kind: acp.PermissionOptionKindAllowOnce})
		}
	case ui.Kind == protocol.UIConfirm:
		out = append(out,
			acp.PermissionOption{OptionId: uiOptionPrefix + "yes", Name: "Yes", Kind: acp.PermissionOptionKindAllowOnce},
			acp.PermissionOption{OptionId: uiOptionPrefix + "no", Name: "No", Kind: acp.PermissionOptionKindRejectOnce})
	default:
		return nil, false
	}
	return append(out, acp.PermissionOption{OptionId: uiDismiss, Name: "Dismiss", Kind: acp.PermissionOptionKindRejectOnce}), true
}

// questionAnswer is the ui_response value for the picked option: the
// option's text, or null for dismiss (and anything not offered).
func questionAnswer(option acp.PermissionOptionId) json.RawMessage {
	if v, ok := strings.CutPrefix(string(option), uiOptionPrefix); ok {
		b, _ := json.Marshal(v)
		return b
	}
	return json.RawMessage("null")
}

// stopReason is the ACP stop reason of a turn: the one a third-party agent
// gave (turn_end.stop_reason), cancelled when the editor cancelled it,
// else end_turn.
func stopReason(te *protocol.TurnEnd, cancelled bool) acp.StopReason {
	if te != nil {
		switch r := acp.StopReason(te.StopReason); r {
		case acp.StopReasonEndTurn, acp.StopReasonMaxTokens, acp.StopReasonMaxTurnRequests, acp.StopReasonRefusal, acp.StopReasonCancelled:
			if !cancelled || r == acp.StopReasonCancelled {
				return r
			}
		}
	}
	if cancelled {
		return acp.StopReasonCancelled
	}
	return acp.StopReasonEndTurn
}

// turnUsage is a turn's token counts in ACP's form.
func turnUsage(u *protocol.Usage) *acp.Usage {
	if u == nil {
		return nil
	}
	out := &acp.Usage{InputTokens: int(u.Input), OutputTokens: int(u.Output), TotalTokens: int(u.Input + u.Output + u.CacheRead + u.CacheWrite)}
	if u.CacheRead > 0 {
		out.CachedReadTokens = acp.Ptr(int(u.CacheRead))
	}
	if u.CacheWrite > 0 {
		out.CachedWriteTokens = acp.Ptr(int(u.CacheWrite))
	}
	return out
}

// promptMessage is the text and images of an ACP prompt. Text blocks are
// joined as they come; an embedded resource (the editor's context: a file,
// a selection) becomes a fenced block headed by its URI, a resource link a
// line naming it, so the model reads what the person attached. An image
// block is an image of the prompt; audio has no Shard form and is refused.
func promptMessage(blocks []acp.ContentBlock) (string, []protocol.Image, error) {
	var b strings.Builder
	var images []protocol.Image
	sep := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
	}
	for _, c := range blocks {
		switch {
		case c.Text != nil:
			b.WriteString(c.Text.Text)
		case c.Image != nil:
			images = append(images, protocol.Image{Type: protocol.ImageType, Data: c.Image.Data, MimeType: c.Image.MimeType})
		case c.ResourceLink != nil:
			sep()
			fmt.Fprintf(&b, "[%s](%s)\n", c.ResourceLink.Name, c.ResourceLink.Uri)
		case c.Resource != nil:
			r := c.Resource.Resource
			switch {
			case r.TextResourceContents != nil:
				sep()
				fmt.Fprintf(&b, "\n%s:\n```\n%s\n```\n", r.TextResourceContents.Uri, strings.TrimSuffix(r.TextResourceContents.Text, "\n"))
			case r.BlobResourceContents != nil && r.BlobResourceContents.MimeType != nil && strings.HasPrefix(*r.BlobResourceContents.MimeType, "image/"):
				images = append(images, protocol.Image{Type: protocol.ImageType, Data: r.BlobResourceContents.Blob, MimeType: *r.BlobResourceContents.MimeType})
			default:
				return "", nil, invalidParams("a binary resource that is not an image cannot be sent to a Shard agent")
			}
		case c.Audio != nil:
			return "", nil, invalidParams("audio prompts are not supported")
		}
	}
	return b.String(), images, nil
}

// mcpServers maps the editor's MCP servers to agent.create's mcp_servers
// (docs/protocol.md §10.1): stdio as {command, args, env}, http as {url,
// headers}. SSE and ACP-transport servers have no Shard form and are
// skipped, named in skipped.
func mcpServers(in []acp.McpServer) (out map[string]protocol.MCPServer, skipped []string) {
	for _, s := range in {
		var name string
		var m protocol.MCPServer
		switch {
		case s.Stdio != nil:
			name = s.Stdio.Name
			m = protocol.MCPServer{Command: s.Stdio.Command, Args: s.Stdio.Args}
			for _, e := range s.Stdio.Env {
				if m.Env == nil {
					m.Env = map[string]string{}
				}
				m.Env[e.Name] = e.Value
			}
		case s.Http != nil:
			name = s.Http.Name
			m = protocol.MCPServer{URL: s.Http.Url}
			for _, h := range s.Http.Headers {
				if m.Headers == nil {
					m.Headers = map[string]string{}
				}
				m.Headers[h.Name] = h.Value
			}
		case s.Sse != nil:
			skipped = append(skipped, s.Sse.Name)
			continue
		case s.Acp != nil:
			skipped = append(skipped, s.Acp.Name)
			continue
		default:
			continue
		}
		if out == nil {
			out = map[string]protocol.MCPServer{}
		}
		out[name] = m
	}
	return out, skipped
}
