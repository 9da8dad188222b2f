package attend

import (
	"strings"
	"unicode/utf8"

	"github.com/shard-dev/shard/protocol"
)

// summaryMax bounds a Request's Summary, in runes.
const summaryMax = 120

// confirmOptions are a confirm's answers, the way the page answers it
// (docs/protocol.md §9.5).
var confirmOptions = []string{"yes", "no"}

// permissionRequest is the Request a permission_request makes, from
// agentID.
func permissionRequest(agentID string, m *protocol.PermissionRequest) Request {
	return Request{
		AgentID: agentID, RequestID: m.RequestID, Kind: KindPermission,
		Tool: m.ToolName, Input: m.Input, Summary: summarize(m.Input), Prompt: m.Prompt,
		Choices: m.Choices, Options: permissionOptions(m),
	}
}

// questionRequest is the Request a ui_request (not a notify) makes.
func questionRequest(agentID string, m *protocol.UIRequest) Request {
	r := Request{
		AgentID: agentID, RequestID: m.RequestID, Kind: KindQuestion,
		Title: m.Title, Message: m.Message, UIKind: m.Kind, Multiple: m.Multiple,
		Placeholder: m.Placeholder, Prefill: m.Prefill,
	}
	switch m.Kind {
	case protocol.UISelect:
		r.Options = append([]string(nil), m.Options...)
	case protocol.UIConfirm:
		r.Options = append([]string(nil), confirmOptions...)
	}
	return r
}

// permissionOptions are the option labels a permission request offers, in
// the order of protocol.OptionAllowOnce, OptionAlwaysAllow, OptionDeny: by
// its choices' intents when it has choices, else by its legacy options
// (none listed: all three).
func permissionOptions(m *protocol.PermissionRequest) []string {
	var out []string
	for _, label := range []string{protocol.OptionAllowOnce, protocol.OptionAlwaysAllow, protocol.OptionDeny} {
		if _, _, err := permissionAnswer(m, label); err == nil {
			out = append(out, label)
		}
	}
	return out
}

// summarize is the one thing a tool's input acts on, as one line: a path,
// a command line, a pattern, a URL; empty when none is recognized.
func summarize(input any) string {
	m, ok := input.(map[string]any)
	if !ok {
		return ""
	}
	for _, k := range []string{"path", "file_path", "file", "command", "cmd", "pattern", "query", "url"} {
		if v, ok := m[k].(string); ok && v != "" {
			return oneLine(v)
		}
	}
	return ""
}

// oneLine is s's first line, cut to summaryMax runes ("…" marks a cut).
func oneLine(s string) string {
	cut := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, cut = s[:i], true
	}
	if utf8.RuneCountInString(s) > summaryMax {
		s, cut = string([]rune(s)[:summaryMax]), true
	}
	if cut {
		s += "…"
	}
	return s
}
