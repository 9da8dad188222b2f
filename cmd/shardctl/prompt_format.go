package main

// How prompt and attach render questions, tool calls and results, and how
// they read answers.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// permissionChoices renders the accepted answers, e.g. "[y]es/[n]o/[a]lways".
func permissionChoices(p *protocol.PermissionRequest) string {
	var cs []string
	if allows(p, protocol.DecisionAllow) {
		cs = append(cs, "[y]es")
	}
	if allows(p, protocol.DecisionDeny) {
		cs = append(cs, "[n]o")
	}
	if allows(p, protocol.DecisionAllowAlways) {
		cs = append(cs, "[a]lways")
	}
	return strings.Join(cs, "/")
}

// alwaysNote says what [a]lways covers (docs/protocol.md §8: allow_always is
// always exact): the same tool with the same arguments, for this agent's
// session, remembered across restarts; any other call still asks. Empty when
// the request does not offer it.
func alwaysNote(p *protocol.PermissionRequest) string {
	if !allows(p, protocol.DecisionAllowAlways) {
		return ""
	}
	tool := orDefault(p.ToolName, "tool")
	return fmt.Sprintf("[a]lways: allow this exact %s call (same arguments) for this agent from now on, without asking; any other call still asks", tool)
}

// allows reports whether the request offers decision (all are offered when
// the request lists none).
func allows(p *protocol.PermissionRequest, decision string) bool {
	return len(p.Options) == 0 || slices.Contains(p.Options, decision)
}

// detailLines are the lines under a question: a permission request's
// details, a select's numbered options.
func detailLines(q question) []string {
	var lines []string
	if p := q.perm; p != nil {
		for _, d := range p.Details {
			if d.Label != "" {
				lines = append(lines, fmt.Sprintf("  %s: %s", d.Label, d.Value))
			} else {
				lines = append(lines, "  "+d.Value)
			}
		}
	} else if u := q.ui; u.Kind == protocol.UISelect {
		for i, opt := range u.Options {
			lines = append(lines, fmt.Sprintf("  %d) %s", i+1, opt))
		}
	}
	return lines
}

// uiHead is a UI request's title and message, as one line.
func uiHead(u *protocol.UIRequest) string {
	return strings.Trim(strings.TrimSpace(strings.Join([]string{u.Title, u.Message}, " — ")), " —")
}

// allowQuestion asks for a permission by what it would do, e.g. "Allow
// write notes.md?".
func allowQuestion(p *protocol.PermissionRequest) string {
	return fmt.Sprintf("Allow %s?", strings.TrimSpace(p.ToolName+" "+toolTarget(p.Input)))
}

// uiQuestion is the line that asks a confirm or an input (attach and
// prompt ask a select each their own way).
func uiQuestion(u *protocol.UIRequest) string {
	head := uiHead(u)
	if u.Kind == protocol.UIConfirm {
		return fmt.Sprintf("%s [y/n]: ", orDefault(head, "Confirm?"))
	}
	if u.Prefill != "" {
		return fmt.Sprintf("%s [%s]: ", orDefault(head, "Input"), u.Prefill)
	}
	return orDefault(head, "Input") + ": "
}

// parseDecision maps an answer to a decision; ok is false for an answer
// that must be asked again. End of input denies.
func parseDecision(ans lineResult, p *protocol.PermissionRequest) (string, bool) {
	if ans.eof && strings.TrimSpace(ans.line) == "" {
		return protocol.DecisionDeny, true
	}
	var d string
	switch strings.ToLower(strings.TrimSpace(ans.line)) {
	case "y", "yes":
		d = protocol.DecisionAllow
	case "n", "no":
		d = protocol.DecisionDeny
	case "a", "always":
		d = protocol.DecisionAllowAlways
	default:
		if ans.eof {
			return protocol.DecisionDeny, true
		}
		return "", false
	}
	if !allows(p, d) {
		if ans.eof {
			return protocol.DecisionDeny, true
		}
		return "", false
	}
	return d, true
}

// parseUIValue maps an answer to a ui_response value; ok is false for an
// answer that must be asked again. End of input answers null (cancel).
func parseUIValue(ans lineResult, u *protocol.UIRequest) (json.RawMessage, bool) {
	line := strings.TrimSpace(ans.line)
	if ans.eof && line == "" {
		return json.RawMessage("null"), true
	}
	str := func(v string) (json.RawMessage, bool) {
		b, _ := json.Marshal(v)
		return b, true
	}
	switch u.Kind {
	case protocol.UISelect:
		if n, err := strconv.Atoi(line); err == nil && n >= 1 && n <= len(u.Options) {
			return str(u.Options[n-1])
		}
		if slices.Contains(u.Options, line) {
			return str(line)
		}
	case protocol.UIConfirm:
		switch strings.ToLower(line) {
		case "y", "yes", "true":
			return str("true")
		case "n", "no", "false":
			return str("false")
		}
	default: // input, editor: the line as typed; empty takes the prefill
		v := strings.TrimRight(ans.line, "\r\n")
		if v == "" {
			v = u.Prefill
		}
		return str(v)
	}
	if ans.eof {
		return json.RawMessage("null"), true
	}
	return nil, false
}

// notifyLine renders a notify UI request, which needs no answer.
func notifyLine(u *protocol.UIRequest) string {
	kind := orDefault(u.NotifyType, "info")
	return fmt.Sprintf("[%s] %s", kind, strings.Trim(strings.Join([]string{u.Title, u.Message}, " — "), " —"))
}

// toolTarget picks what a tool acts on from its arguments, for one short
// line: a path, a command, a pattern or a URL.
func toolTarget(args any) string {
	m, ok := args.(map[string]any)
	if !ok {
		return ""
	}
	for _, k := range []string{"path", "file_path", "file", "command", "cmd", "pattern", "query", "url"} {
		if v, ok := m[k].(string); ok && v != "" {
			return truncate(v, 60)
		}
	}
	return ""
}

// resultSummary is the "↳" line of a tool result.
func resultSummary(r *protocol.ToolResult) string {
	var b strings.Builder
	if r.IsError {
		b.WriteString("error")
		msg := firstNonEmpty(r.Content.Message, r.Content.Text)
		if msg != "" {
			b.WriteString(": " + truncate(msg, 80))
		}
	} else {
		b.WriteString("ok")
	}
	if r.ExitCode != nil && *r.ExitCode != 0 {
		fmt.Fprintf(&b, " (exit %d)", *r.ExitCode)
	}
	return b.String()
}
