package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// Tool names, in the order Builtins returns them.
const (
	NameRead  = "read"
	NameLs    = "ls"
	NameGrep  = "grep"
	NameFind  = "find"
	NameWrite = "write"
	NameEdit  = "edit"
	NameBash  = "bash"
)

// Defaults applied by Env for zero or negative fields.
const (
	// DefaultBashTimeout bounds one bash call unless it asks for timeout_ms.
	DefaultBashTimeout = 2 * time.Minute
	// DefaultMaxOutput is the number of bytes of tool output kept before
	// truncation (64 KiB).
	DefaultMaxOutput = 64 << 10
)

// Content kinds of protocol.ToolResultContent (docs/protocol.md §11).
const (
	ContentText  = "text"
	ContentJSON  = "json"
	ContentError = "error"
)

// Render kinds the built-in tools emit (docs/protocol.md §11).
const (
	RenderCode     = "code"
	RenderPathList = "path_list"
	RenderDiff     = "diff"
)

// Tool is one built-in tool. Every function field of a built-in tool is
// set. A Tool holds no state, so its functions may be called concurrently.
// The runtime runs Check first; Ask, Preview and Run validate again, and
// given arguments that fail Check, Run returns an error result while Ask and
// Preview return something harmless.
type Tool struct {
	// Name is the tool's name on the wire and to the model.
	Name string
	// Description is what the model sees.
	Description string
	// Schema is the JSON schema of the arguments: an object with typed,
	// described properties and its required fields.
	Schema json.RawMessage
	// ReadOnly is true for tools that never change anything (tool_call
	// read_only, docs/protocol.md §9.4). Mutating tools go through the
	// permission gate.
	ReadOnly bool
	// Check validates args before anything runs. Its errors wrap
	// ErrInvalidArgs; the runtime turns them into a tool error result and
	// asks no permission.
	Check func(args map[string]any) error
	// Ask describes a call for the permission request (docs/protocol.md §9.5):
	// the prompt text and the details (path, command, diff preview…).
	// Mutating tools need it; read-only tools have one too, for a runtime
	// that asks about every call.
	Ask func(env Env, args map[string]any) (prompt string, details []protocol.PermissionDetail)
	// Preview is the start-time render descriptor for tool_call: the diff
	// a write or edit would make; nil for the other tools and for an edit
	// that cannot apply.
	Preview func(env Env, args map[string]any) *protocol.RenderDescriptor
	// Run executes the call. It honours ctx (abort): a cancelled ctx ends it
	// promptly, with an error result.
	Run func(ctx context.Context, env Env, args map[string]any) Result
}

// Env is where and how a call runs. The zero value runs in the process's
// working directory with the defaults.
type Env struct {
	// Cwd is the directory relative paths are resolved against and bash
	// runs in. Empty means the process's working directory.
	Cwd string
	// BashTimeout bounds a bash call that does not set timeout_ms.
	// Zero or negative means DefaultBashTimeout (2m).
	BashTimeout time.Duration
	// MaxOutput is the number of bytes of output a tool returns before it
	// truncates. Zero or negative means DefaultMaxOutput (64 KiB).
	MaxOutput int
	// Environ is the environment bash commands run with, as "KEY=value"
	// strings. Nil means the process's environment; a runtime holding
	// secrets in its environment (a provider API key) passes a filtered
	// copy.
	Environ []string
}

// WithDefaults returns a copy of e with the defaults applied.
func (e Env) WithDefaults() Env {
	if e.BashTimeout <= 0 {
		e.BashTimeout = DefaultBashTimeout
	}
	if e.MaxOutput <= 0 {
		e.MaxOutput = DefaultMaxOutput
	}
	return e
}

// Result is what one call produced.
type Result struct {
	// Content is the output the model sees: kind "text" or, for failures,
	// "error".
	Content protocol.ToolResultContent
	// IsError marks a failed call (tool_result is_error). A bash command
	// that exits non-zero, times out or is aborted is an error whose
	// Content is still the command's output (kind "text").
	IsError bool
	// ExitCode is the shell's exit status; bash only. A shell killed by a
	// signal reports 128+signal, as shells do.
	ExitCode *int
	// Render is the client-side render hint: "code" (read), "path_list"
	// (ls, find, grep) or "diff" (write, edit); nil otherwise.
	Render *protocol.RenderDescriptor
}

// TextResult is a successful result with text content.
func TextResult(text string) Result {
	return Result{Content: protocol.ToolResultContent{Kind: ContentText, Text: text}}
}

// ErrorResult is a failed result with an error message.
func ErrorResult(message string) Result {
	return Result{Content: protocol.ToolResultContent{Kind: ContentError, Message: message}, IsError: true}
}

func errorf(format string, args ...any) Result {
	return ErrorResult(fmt.Sprintf(format, args...))
}

// Builtins returns the built-in tools in their canonical order: read, ls,
// grep, find, write, edit, bash. Every call builds a fresh slice.
func Builtins() []Tool {
	return []Tool{readTool(), lsTool(), grepTool(), findTool(), writeTool(), editTool(), bashTool()}
}

// Lookup returns the built-in tool called name.
func Lookup(name string) (Tool, bool) {
	for _, t := range Builtins() {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// askReadOnly is the Ask of a read-only tool: "Allow <verb> <path>?" with
// the path argument (default: the working directory) and any pattern or
// glob as details.
func askReadOnly(verb string) func(Env, map[string]any) (string, []protocol.PermissionDetail) {
	return func(env Env, args map[string]any) (string, []protocol.PermissionDetail) {
		p, _ := optStringArg(args, "path", ".")
		if abs, err := env.resolve(p); err == nil {
			p = env.display(abs)
		}
		details := []protocol.PermissionDetail{{Label: "path", Value: p, Format: "path"}}
		for _, key := range []string{"pattern", "glob"} {
			if v, _ := optStringArg(args, key, ""); v != "" {
				details = append(details, protocol.PermissionDetail{Label: key, Value: v, Format: "code"})
			}
		}
		what := p
		if p == "." {
			what = "the working directory"
		}
		return fmt.Sprintf("Allow %s %s?", verb, what), details
	}
}

// noPreview is the Preview of tools that have nothing to show before they
// run.
func noPreview(Env, map[string]any) *protocol.RenderDescriptor { return nil }

// cancelled is the result of a call whose context ended.
func cancelled(ctx context.Context) Result {
	return errorf("cancelled: %v", context.Cause(ctx))
}
