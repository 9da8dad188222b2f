package refagent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
	"github.com/shard-dev/shard/runtime/skills"
	"github.com/shard-dev/shard/runtime/tools"
)

// toolSubagent is the name of the subagent tool (subagent.go).
const toolSubagent = "subagent"

// toolOutput is what a tool run produced.
type toolOutput struct {
	content  protocol.ToolResultContent
	isError  bool
	exitCode *int // bash
	render   *protocol.RenderDescriptor
}

func errorOutput(format string, args ...any) toolOutput {
	return toolOutput{content: protocol.ToolResultContent{Kind: tools.ContentError, Message: fmt.Sprintf(format, args...)}, isError: true}
}

// tool is one registered tool: a built-in of runtime/tools bound to the
// runtime's tools.Env, or the subagent tool. A tool is either read-only
// (runs without asking) or mutating (goes through plan mode and the
// permission gate), except for an ungated tool, which is reported as
// mutating but runs without either (the subagent and team tools; see
// subagent.go and team.go).
type tool struct {
	name     string
	readOnly bool
	// ungated skips plan mode and the permission gate for a tool that is
	// not read-only.
	ungated bool
	// unavailable, when set, is the error result every call gets before
	// any gate runs.
	unavailable string
	// spec is what the model is told about the tool.
	spec provider.ToolSpec
	// check validates the arguments before any gate runs; its error text
	// is the tool error the model sees.
	check func(args map[string]any) error
	// ask builds the permission prompt and details of a mutating call.
	ask func(args map[string]any) (prompt string, details []protocol.PermissionDetail)
	// preview is the tool_call render descriptor; nil or returning nil
	// means none.
	preview func(args map[string]any) *protocol.RenderDescriptor
	// run executes the tool; ctx is cancelled by abort.
	run func(ctx context.Context, args map[string]any) toolOutput
	// inTurn, when set, runs the tool instead of run, inside the turn: a
	// tool that opens requests of the turn (the ask tool, ask.go).
	inTurn func(t *turnState, args map[string]any) toolOutput
}

// toolbox is the runtime's tools. It is immutable after newToolbox, so it
// is read without a lock; the runtime swaps in a new one when an MCP
// server's tools change (runtime.reloadTools).
type toolbox struct {
	// byName are the registered tools by name; specs what the model is
	// told about the available ones, in registration order.
	byName map[string]tool
	specs  []provider.ToolSpec
}

// newToolbox registers the built-in tools (read, ls, grep, find, write,
// edit, bash), the ask tool, the subagent tool, whose children are created in the mode
// that mode returns, the team tool (team.go), recall and, when the agent has skills, the skill
// tool; then it limits them to opts.Tools (limit).
func newToolbox(opts Options, log *slog.Logger, mode func() string, sk []skills.Skill) toolbox {
	env := tools.Env{Cwd: opts.Cwd, Environ: bashEnviron(opts.Environ, keyVars(opts)...)}
	tb := toolbox{byName: make(map[string]tool)}
	for _, bt := range tools.Builtins() {
		tb.add(builtin(bt, env))
	}
	tb.add(askTool())
	for _, tl := range opts.extraTools {
		tb.add(tl)
	}
	if opts.mcpTools != nil {
		for _, tl := range opts.mcpTools() {
			tb.add(tl)
		}
	}
	tb.add(subagentClient{socket: opts.Socket, agentID: opts.AgentID, log: log, mode: mode}.tool())
	tb.add(teamClient{socket: opts.Socket, agentID: opts.AgentID, log: log}.tool())
	transcript := ""
	if opts.SessionDir != "" {
		transcript = filepath.Join(opts.SessionDir, sessionFileName)
	}
	tb.add(recallTool(transcript))
	if len(sk) > 0 {
		tb.add(skillTool(sk))
	}
	tb.limit(opts.Tools, log)
	return tb
}

// add registers tl; the model is told about it unless it is unavailable.
func (tb *toolbox) add(tl tool) {
	tb.byName[tl.name] = tl
	if tl.unavailable == "" {
		tb.specs = append(tb.specs, tl.spec)
	}
}

// limit keeps the tools allow names (nil: all) and the skill tool, which
// the agent's skills bring. The others stay registered but unavailable:
// the model is not told about them, and a call of one is refused with a
// tool error before any gate, never run (docs/protocol.md §10.1 tools).
func (tb *toolbox) limit(allow []string, log *slog.Logger) {
	if allow == nil {
		return
	}
	keep := map[string]bool{toolSkill: true}
	for _, n := range allow {
		if _, ok := tb.byName[n]; !ok {
			log.Warn("the agent's tools name an unknown tool; ignored", "tool", n)
			continue
		}
		keep[n] = true
	}
	var specs []provider.ToolSpec
	var kept []string
	for _, s := range tb.specs {
		if keep[s.Name] {
			specs = append(specs, s)
			kept = append(kept, s.Name)
		}
	}
	tb.specs = specs
	offered := "none"
	if len(kept) > 0 {
		offered = strings.Join(kept, ", ")
	}
	for name, tl := range tb.byName {
		if !keep[name] {
			tl.unavailable = fmt.Sprintf("the tool %q is not available to this agent: its tools are limited to %s", name, offered)
			tb.byName[name] = tl
		}
	}
}

// ToolNames are the names of the reference runtime's tools, in the order
// the model is offered them: the names an Agent's tools list may hold
// (docs/protocol.md §10.1), besides <server>__<tool> for the agent's MCP
// servers, whose tools are known only once the runtime connects. The
// daemon refuses an agent.create naming any other for the reference
// runtime.
func ToolNames() []string {
	tb := newToolbox(Options{Identity: Identity{Environ: []string{}}}, slog.New(slog.DiscardHandler), func() string { return "" }, []skills.Skill{{}})
	names := make([]string, 0, len(tb.byName))
	for _, bt := range tools.Builtins() {
		names = append(names, bt.Name)
	}
	for name := range tb.byName {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names[len(tools.Builtins()):])
	return names
}

// builtin binds a tool of runtime/tools to env.
func builtin(bt tools.Tool, env tools.Env) tool {
	return tool{
		name:     bt.Name,
		readOnly: bt.ReadOnly,
		spec:     provider.ToolSpec{Name: bt.Name, Description: bt.Description, Schema: bt.Schema},
		check:    bt.Check,
		ask:      func(args map[string]any) (string, []protocol.PermissionDetail) { return bt.Ask(env, args) },
		preview:  func(args map[string]any) *protocol.RenderDescriptor { return bt.Preview(env, args) },
		run: func(ctx context.Context, args map[string]any) toolOutput {
			res := bt.Run(ctx, env, args)
			return toolOutput{content: res.Content, isError: res.IsError, exitCode: res.ExitCode, render: res.Render}
		},
	}
}

// bashEnviron is the environment bash commands get: environ (nil: the
// process's) without the providers' API key variables.
func bashEnviron(environ []string, keyVars ...string) []string {
	if environ == nil {
		environ = os.Environ()
	}
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); name != "" && slices.Contains(keyVars, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// subagentSchema is the JSON schema of the subagent tool's arguments.
var subagentSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["create", "wait", "status", "stop"], "description": "What to do. Default create."},
    "name": {"type": "string", "description": "create, one task: a short name for the child agent."},
    "task": {"type": "string", "description": "create, one task: what the child agent should do, self-contained."},
    "tasks": {"type": "array", "description": "create, several tasks: one child agent each, instead of name and task.",
      "items": {"type": "object", "properties": {"name": {"type": "string"}, "task": {"type": "string"}}, "required": ["name", "task"]}},
    "strategy": {"type": "string", "enum": ["parallel", "chain"], "description": "create with tasks: run them at once (parallel, the default) or one after another (chain)."},
    "tools": {"type": "array", "items": {"type": "string"}, "description": "create: limit the children to these of your tools. Default: all of yours."},
    "skills": {"type": "array", "items": {"type": "string"}, "description": "create: give the children only these of your skills. Default: all of yours."},
    "model": {"type": "string", "description": "create: the children's model, a model id (provider/model) from any configured provider, or a model name. Default: yours."},
    "handles": {"type": "array", "items": {"type": "string"}, "description": "wait: the job, run or agent ids or aliases to wait for."},
    "mode": {"type": "string", "enum": ["any", "all"], "description": "wait: return when any or when all of them are done. Default all."},
    "timeout": {"type": "number", "minimum": 0, "description": "wait: seconds to wait at most; omitted waits until done, 0 only polls."},
    "targets": {"type": "array", "items": {"type": "string"}, "description": "status: the handles to report on; omitted lists the latest jobs."},
    "handle": {"type": "string", "description": "stop: the job, run or agent to stop."}
  },
  "additionalProperties": false
}`)

const subagentDescription = "Delegate work to child agents that run in the background as jobs, and manage them. " +
	"create starts one child (name + task) or several (tasks, in parallel or as a chain) and returns their " +
	"job, run and agent ids and aliases at once; wait blocks until they finish and returns their final text; " +
	"status reports on jobs; stop ends one. Children work in the same directory and in the current mode."
