package refagent

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/tools"
)

// runTools runs the tool calls of one assistant message in order. Their
// results form one user message of tool_result blocks; each block enters the
// live window together with its tool_result event (so get_sync never lags
// the events), and the message is persisted once complete. An abort stops
// the run; calls that did not run get an "aborted" block (so the transcript
// never holds an unanswered call) but no events. The message is written to
// the transcript (with the exit codes) and synced before runTools returns,
// so before any turn_end.
func (t *turnState) runTools(calls []toolCallReq) *outcome {
	r := t.r
	b := &toolBatch{msgID: r.ids.next("msg"), idx: -1}
	var end *outcome
	for i, c := range calls {
		if err := t.runTool(b, c); err != nil {
			end = &outcome{kind: outAborted}
			r.mu.Lock()
			for _, rest := range calls[i:] {
				r.conv.addResultLocked(b, resultBlock(rest.id, errorOutput("aborted")), nil)
			}
			r.mu.Unlock()
			break
		}
	}
	r.mu.Lock()
	written := r.conv.persistBatchLocked(b)
	r.mu.Unlock()
	r.awaitDurable(written)
	return end
}

func resultBlock(id string, out toolOutput) protocol.ContentBlock {
	content := out.content
	return protocol.ContentBlock{Type: protocol.BlockToolResult, ToolCallID: id, Content: &content, IsError: out.isError}
}

// runTool takes one call through validation, plan mode and the permission
// gate, then reports it with tool_call and tool_result. It returns
// errTurnAborted when the turn ended meanwhile.
func (t *turnState) runTool(b *toolBatch, c toolCallReq) error {
	tl, ok := t.tools.byName[c.name]
	if !ok {
		if server, _, mcpName := strings.Cut(c.name, MCPToolSep); mcpName && t.r.opts.mcpDown[server] != "" {
			why := t.r.opts.mcpDown[server]
			return t.report(b, c, tool{name: c.name}, func() toolOutput { return errorOutput("the tool %q is unavailable: %s", c.name, why) })
		}
		return t.report(b, c, tool{name: c.name}, func() toolOutput { return errorOutput("unknown tool %q", c.name) })
	}
	fail := func(out toolOutput) error {
		return t.report(b, c, tool{name: tl.name, readOnly: tl.readOnly}, func() toolOutput { return out })
	}
	switch {
	case tl.unavailable != "":
		return fail(errorOutput("%s", tl.unavailable))
	case c.argsErr != nil:
		return fail(errorOutput("invalid arguments: %v", c.argsErr))
	}
	if err := tl.check(c.args); err != nil {
		return fail(errorOutput("%v", err))
	}
	if !tl.readOnly && !tl.ungated {
		refusal, err := t.gate(tl, c)
		if err != nil {
			return err
		}
		if refusal != nil {
			return fail(*refusal)
		}
	}
	if tl.inTurn != nil {
		return t.report(b, c, tl, func() toolOutput { return tl.inTurn(t, c.args) })
	}
	return t.report(b, c, tl, func() toolOutput { return tl.run(t.ctx, c.args) })
}

// report writes tool_call (with tl's start-time render, if any), runs fn,
// and writes tool_result while adding the result to the live window.
func (t *turnState) report(b *toolBatch, c toolCallReq, tl tool, fn func() toolOutput) error {
	args := c.args
	if args == nil {
		args = map[string]any{}
	}
	var render *protocol.RenderDescriptor
	if tl.preview != nil {
		render = tl.preview(args)
	}
	readOnly := tl.readOnly
	r := t.r
	r.mu.Lock()
	if t.aborted || t.ctx.Err() != nil {
		r.mu.Unlock()
		return errTurnAborted
	}
	r.out.emit(protocol.ToolCall{Header: protocol.Header{Type: protocol.TypeToolCall}, ToolCallID: c.id, Name: c.name, Args: args, Render: render, ReadOnly: &readOnly})
	r.mu.Unlock()

	start := time.Now()
	out, crashed := runTool(fn)
	ms := time.Since(start).Milliseconds()

	r.mu.Lock()
	defer r.mu.Unlock()
	if crashed {
		// A tool that crashes is TOOL_ERROR (docs/protocol.md §8): an
		// error event that does not end the turn, and an error result the
		// model sees, so the call is never left without one.
		r.log.Error("tool crashed", "tool", c.name)
		r.out.emit(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: protocol.CodeToolError,
			Message: fmt.Sprintf("tool %s crashed", c.name)})
	}
	r.out.emit(protocol.ToolResult{
		Header:     protocol.Header{Type: protocol.TypeToolResult},
		ToolCallID: c.id,
		Content:    out.content,
		IsError:    out.isError,
		ExitCode:   out.exitCode,
		DurationMs: &ms,
		Render:     out.render,
	})
	r.conv.addResultLocked(b, resultBlock(c.id, out), out.exitCode)
	return nil
}

// refusal is what the model is told when the person denied a call: the
// reason they gave with permission_response (docs/protocol.md §9.5), if
// any, so the model can change course instead of guessing.
func refusal(reason string) toolOutput {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return errorOutput("permission denied")
	}
	return errorOutput("permission denied; the person's reason: %s", reason)
}

// runTool runs fn, turning a panic into an error result: crashed is set
// and the result says the tool crashed, without the panic's value (which
// may quote arguments or file contents).
func runTool(fn func() toolOutput) (out toolOutput, crashed bool) {
	defer func() {
		if p := recover(); p != nil {
			out, crashed = errorOutput("the tool crashed; its work may be incomplete"), true
		}
	}()
	return fn(), false
}

// Permission presentation: legacy options and structured choices.
func permissionOptions() []string {
	return []string{protocol.DecisionAllow, protocol.DecisionAllowAlways, protocol.DecisionDeny}
}

// Choice ids of the permission requests this runtime builds. The first
// three map to the legacy decisions; allowSignature is the backend-built
// bash_signature grant (docs/protocol.md §9.5, §13).
const (
	choiceAllow          = "allow"
	choiceAllowAlways    = "allow_always"
	choiceDeny           = "deny"
	choiceAllowSignature = "allow_signature"
)

// permissionChoices are the choices of a request for c: allow once, allow
// this exact request always, deny, and for a bash call whose command line
// reduces to signatures (bashsig.go) the choice to allow those signatures
// always, which sigs returns (nil when not offered). Each choice has a key
// (accelerator) a client may bind: y, a, s and n, the legacy options' keys
// plus s for the signature.
func permissionChoices(c toolCallReq) (choices []protocol.PermissionChoice, decisions map[string]string, sigs []bashSignature) {
	choices = []protocol.PermissionChoice{
		{ID: choiceAllow, Label: "Allow once", Intent: "allow", Accelerator: "y"},
		{ID: choiceAllowAlways, Label: "Always allow this exact request", Intent: "persist", Accelerator: "a"},
	}
	decisions = map[string]string{
		choiceAllow:       protocol.DecisionAllow,
		choiceAllowAlways: protocol.DecisionAllowAlways,
		choiceDeny:        protocol.DecisionDeny,
	}
	if c.name == tools.NameBash {
		if s, err := commandSignatures(c); err == nil {
			sigs = s
			names := make([]string, len(s))
			for i, sig := range s {
				names[i] = "`" + sig.String() + "`"
			}
			choices = append(choices, protocol.PermissionChoice{
				ID:          choiceAllowSignature,
				Label:       "Always allow " + strings.Join(names, ", ") + " for this agent",
				Description: "Any command line made only of these commands with exactly these flags (any other arguments) runs without asking in this agent's session; other commands or flags still ask.",
				Intent:      "persist",
				Accelerator: "s",
			})
			decisions[choiceAllowSignature] = protocol.DecisionAllowAlways
		}
	}
	choices = append(choices, protocol.PermissionChoice{ID: choiceDeny, Label: "Deny", Intent: "deny", Accelerator: "n"})
	return choices, decisions, sigs
}

// grantKey identifies an exact request for allow_always: the tool name and
// the canonical JSON of its arguments (sorted keys, numbers verbatim).
func grantKey(c toolCallReq) string {
	return c.name + " " + string(protocol.MustMarshal(c.args))
}

// gate decides whether a mutating call may run. It returns a refusal to
// report as the tool's error result, nil to run it, or errTurnAborted.
//
// An exact request the user allowed always, or a bash call whose every
// simple command has a granted signature (grants.go, bashsig.go; persisted
// in grants.jsonl), runs without asking, whatever the headless policy. A
// refusal carries the person's reason to the model (refusal). Any other request is sent
// out and waits for an answer; under the daemon, a request nobody
// interactive can answer is answered by the daemon's headless path (deny,
// source "headless", for deny and allow_if_rule_matches; nothing for queue).
// When no answer comes within HeadlessTimeout the policy decides what the
// model is told: queue fails the tool with TIMEOUT, deny and
// allow_if_rule_matches deny it.
func (t *turnState) gate(tl tool, c toolCallReq) (*toolOutput, error) {
	r := t.r
	if r.currentMode() == modePlan {
		out := errorOutput("%s is not allowed: the agent is in plan mode, where tools that change files or run commands are refused; switch to build mode to run it", c.name)
		return &out, nil
	}
	if r.grants.allows(c) { // every headless policy honours the user's own grants
		return nil, nil
	}

	prompt, details := tl.ask(c.args)
	choices, decisions, sigs := permissionChoices(c)
	p := &pendingRequest{id: r.ids.next("perm"), kind: kindPermission, choices: decisions, done: make(chan resolution, 1)}
	p.raw = protocol.MustMarshal(protocol.PermissionRequest{
		Header:    protocol.Header{Type: protocol.TypePermissionRequest},
		RequestID: p.id,
		ToolName:  c.name,
		Input:     c.args,
		Prompt:    prompt,
		Options:   permissionOptions(),
		Details:   details,
		Choices:   choices,
	})
	if err := t.open(p, protocol.StatusWaitingForPermission); err != nil {
		return nil, err
	}
	res := t.await(p)
	var out toolOutput
	switch {
	case res.by == byAbort:
		return nil, errTurnAborted
	case res.by == byTimeout && r.opts.HeadlessPolicy == protocol.HeadlessQueue:
		out = errorOutput("permission request timed out (TIMEOUT): no answer within %s", r.opts.HeadlessTimeout)
	case res.by == byTimeout:
		out = errorOutput("permission denied: no answer within %s (headless policy %s)", r.opts.HeadlessTimeout, r.opts.HeadlessPolicy)
	case res.decision == protocol.DecisionAllow:
		return nil, nil
	case res.choiceID == choiceAllowSignature:
		if err := r.grants.addSignatures(sigs, time.Now()); err != nil {
			r.log.Error("grant not persisted; it holds until the runtime stops", slog.Any("err", err))
		}
		return nil, nil
	case res.decision == protocol.DecisionAllowAlways:
		if err := r.grants.add(c, time.Now()); err != nil {
			r.log.Error("grant not persisted; it holds until the runtime stops", slog.Any("err", err))
		}
		return nil, nil
	case res.source == sourceHeadless:
		out = errorOutput("permission denied by the headless policy: no interactive client could answer")
	default:
		out = refusal(res.reason)
	}
	return &out, nil
}
