package refagent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
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
// mutating but runs without either (the subagent tool; see subagent.go).
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
}

// toolbox is the runtime's tools. It is immutable after newToolbox, so it
// is read without a lock.
type toolbox struct {
	// byName are the registered tools by name; specs what the model is
	// told about the available ones, in registration order.
	byName map[string]tool
	specs  []provider.ToolSpec
}

// newToolbox registers the built-in tools (read, ls, grep, find, write,
// edit, bash) and the subagent tool, whose children are created in the
// mode that mode returns.
func newToolbox(opts Options, log *slog.Logger, mode func() string) toolbox {
	env := tools.Env{Cwd: opts.Cwd, Environ: bashEnviron(opts.Environ, keyVars(opts)...)}
	tb := toolbox{byName: make(map[string]tool)}
	for _, bt := range tools.Builtins() {
		tl := builtin(bt, env)
		tb.byName[tl.name] = tl
		tb.specs = append(tb.specs, tl.spec)
	}
	sub := subagentClient{socket: opts.Socket, agentID: opts.AgentID, log: log, mode: mode}.tool()
	tb.byName[sub.name] = sub
	if sub.unavailable == "" {
		tb.specs = append(tb.specs, sub.spec)
	}
	return tb
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
