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

// permissionChoices renders the accepted answers, e.g. "[y]es/[n]o/[a]lways",
// and for a request with structured choices (listed by detailLines) their
// numbers first: "1-4/[y]es/[n]o/[a]lways".
func permissionChoices(p *protocol.PermissionRequest) string {
	var cs []string
	if len(p.Choices) > 0 {
		for _, k := range []struct{ intent, label string }{{"allow", "[y]es"}, {"deny", "[n]o"}, {"persist", "[a]lways"}} {
			if choiceByIntent(p, k.intent) != nil {
				cs = append(cs, k.label)
			}
		}
		return strings.Join(append([]string{"1-" + strconv.Itoa(len(p.Choices))}, cs...), "/")
	}
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
// the request does not offer it, and when it offers structured choices,
// whose labels say what each covers.
func alwaysNote(p *protocol.PermissionRequest) string {
	if len(p.Choices) > 0 || !allows(p, protocol.DecisionAllowAlways) {
		return ""
	}
	tool := orDefault(p.ToolName, "tool")
	return fmt.Sprintf("[a]lways: allow this exact %s call (same arguments) for this agent from now on, without asking; any other call still asks", tool)
}

// reasonNote tells how to give a reason with an answer.
const reasonNote = "(a reason for the agent may follow the answer, e.g. \"n use make instead\")"

// choiceByIntent is the request's first choice of intent; for persist the
// exact allow_always is preferred, so [a]lways keeps its meaning.
func choiceByIntent(p *protocol.PermissionRequest, intent string) *protocol.PermissionChoice {
	var first *protocol.PermissionChoice
	for i := range p.Choices {
		c := &p.Choices[i]
		if c.Intent != intent {
			continue
		}
		if intent == "persist" && c.ID == protocol.DecisionAllowAlways {
			return c
		}
		if first == nil {
			first = c
		}
	}
	return first
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
		for i, c := range p.Choices {
			lines = append(lines, fmt.Sprintf("  %d) %s", i+1, c.Label))
		}
	} else if u := q.ui; u.Kind == protocol.UISelect {
		for i, opt := range u.Options {
			lines = append(lines, fmt.Sprintf("  %d) %s", i+1, opt))
		}
		if u.Multiple {
			lines = append(lines, "  (several: numbers or options separated by commas; empty picks none)")
		}
	}
	return lines
}

// selectRange is the answers a select takes, e.g. "[1-3]", or for a
// multi-select "[1-3, several: 1,3]".
func selectRange(u *protocol.UIRequest) string {
	if u.Multiple {
		return fmt.Sprintf("[1-%d, several: 1,3]", len(u.Options))
	}
	return fmt.Sprintf("[1-%d]", len(u.Options))
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

// permAnswer is the answer to a permission request a line makes: a
// choice_id when the request offers structured choices, else a legacy
// decision, and the person's reason for the agent.
type permAnswer struct {
	decision, choiceID, reason string
}

// response is the permission_response a carries.
func (a permAnswer) response(agentID, requestID string) *protocol.PermissionResponse {
	return &protocol.PermissionResponse{
		Header:    protocol.Header{Type: protocol.TypePermissionResponse, AgentID: agentID},
		RequestID: requestID, Decision: a.decision, ChoiceID: a.choiceID, Reason: a.reason,
	}
}

// splitAnswer cuts a line into its answer word and the reason after it
// (after a space or a colon): "n: use make instead".
func splitAnswer(line string) (key, reason string) {
	line = strings.TrimSpace(line)
	i := strings.IndexAny(line, " \t:")
	if i < 0 {
		return line, ""
	}
	return line[:i], strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line[i:]), ":"))
}

// parsePermission maps an answer to p: y/n/a (by the choices' intents when
// p offers choices, else the legacy decisions), a choice's number, id or
// accelerator; a reason may follow. ok is false for an answer that must be
// asked again. End of input denies.
func parsePermission(ans lineResult, p *protocol.PermissionRequest) (permAnswer, bool) {
	key, reason := splitAnswer(ans.line)
	deny := func() (permAnswer, bool) {
		if c := choiceByIntent(p, "deny"); c != nil {
			return permAnswer{choiceID: c.ID, reason: reason}, true
		}
		return permAnswer{decision: protocol.DecisionDeny, reason: reason}, true
	}
	if ans.eof && key == "" {
		return deny()
	}
	lower := strings.ToLower(key)
	d := map[string]string{"y": protocol.DecisionAllow, "yes": protocol.DecisionAllow, "allow": protocol.DecisionAllow,
		"n": protocol.DecisionDeny, "no": protocol.DecisionDeny, "deny": protocol.DecisionDeny,
		"a": protocol.DecisionAllowAlways, "always": protocol.DecisionAllowAlways, "allow_always": protocol.DecisionAllowAlways}[lower]
	if len(p.Choices) > 0 {
		for _, c := range p.Choices {
			if key == c.ID || (c.Accelerator != "" && strings.EqualFold(key, c.Accelerator)) {
				return permAnswer{choiceID: c.ID, reason: reason}, true
			}
		}
		if n, err := strconv.Atoi(key); err == nil && n >= 1 && n <= len(p.Choices) {
			return permAnswer{choiceID: p.Choices[n-1].ID, reason: reason}, true
		}
		intent := map[string]string{protocol.DecisionAllow: "allow", protocol.DecisionDeny: "deny", protocol.DecisionAllowAlways: "persist"}[d]
		if c := choiceByIntent(p, intent); intent != "" && c != nil {
			return permAnswer{choiceID: c.ID, reason: reason}, true
		}
		if ans.eof {
			return deny()
		}
		return permAnswer{}, false
	}
	if d == "" || !allows(p, d) {
		if ans.eof {
			return deny()
		}
		return permAnswer{}, false
	}
	return permAnswer{decision: d, reason: reason}, true
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
		if u.Multiple {
			if v, ok := parseMultiple(line, u.Options); ok {
				return v, true
			}
			break
		}
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

// parseMultiple maps a multi-select answer to the list of options picked:
// numbers or option texts separated by commas (or, for numbers, spaces);
// an empty line picks none. ok is false when one is not an option.
func parseMultiple(line string, options []string) (json.RawMessage, bool) {
	picked := []string{}
	parts := strings.Split(line, ",")
	if !strings.Contains(line, ",") {
		parts = strings.Fields(line)
		if len(parts) > 1 {
			for _, f := range parts { // "1 3", or one option with spaces
				if _, err := strconv.Atoi(f); err != nil {
					parts = []string{line}
					break
				}
			}
		}
	}
	for _, part := range parts {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		opt := ""
		if n, err := strconv.Atoi(part); err == nil && n >= 1 && n <= len(options) {
			opt = options[n-1]
		} else if slices.Contains(options, part) {
			opt = part
		} else {
			return nil, false
		}
		if !slices.Contains(picked, opt) {
			picked = append(picked, opt)
		}
	}
	b, _ := json.Marshal(picked)
	return b, true
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
