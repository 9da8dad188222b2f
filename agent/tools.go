package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/shard-dev/shard/protocol"
)

// Tool names.
const (
	toolRead     = "read"
	toolWrite    = "write"
	toolSubagent = "subagent"
)

// maxReadBytes bounds what `read` returns (wire spec §2.3: prefer truncation
// to multi-MB blobs).
const maxReadBytes = 1 << 20

// toolOutput is what a tool run produced.
type toolOutput struct {
	content protocol.ToolResultContent
	isError bool
	render  *protocol.RenderDescriptor
}

func textOutput(text string) toolOutput {
	return toolOutput{content: protocol.ToolResultContent{Kind: "text", Text: text}}
}

func errorOutput(format string, args ...any) toolOutput {
	return toolOutput{content: protocol.ToolResultContent{Kind: "error", Message: fmt.Sprintf(format, args...)}, isError: true}
}

// tool is one registered tool. A tool is either read-only (runs without
// asking) or mutating (goes through plan mode and the permission gate),
// except for an ungated tool, which is reported as mutating but runs
// without either (the subagent tool; see subagentTool).
type tool struct {
	name     string
	readOnly bool
	// ungated skips plan mode and the permission gate for a tool that is
	// not read-only.
	ungated bool
	// unavailable, when set, is the error result every call gets before
	// any gate runs.
	unavailable string
	// check validates the arguments before any gate runs.
	check func(args map[string]any) error
	// ask builds the permission prompt and details of a mutating call.
	ask func(args map[string]any) (prompt string, details []protocol.PermissionDetail)
	// run executes the tool with paths relative to cwd.
	run func(ctx context.Context, cwd string, args map[string]any) toolOutput
}

// lookupTool returns the tool registered under name.
func (r *runtime) lookupTool(name string) (tool, bool) {
	switch name {
	case toolRead:
		return tool{name: toolRead, readOnly: true, check: checkRead, run: runRead}, true
	case toolWrite:
		return tool{name: toolWrite, check: checkWrite, ask: askWrite, run: runWrite}, true
	case toolSubagent:
		return r.subagentTool(), true
	}
	return tool{}, false
}

// stringArg returns args[key] when it is a string.
func stringArg(args map[string]any, key string) (string, error) {
	v, ok := args[key]
	if !ok {
		return "", fmt.Errorf("argument %q is required", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("argument %q must be a string", key)
	}
	return s, nil
}

func pathArg(args map[string]any) (string, error) {
	p, err := stringArg(args, "path")
	if err == nil && p == "" {
		err = errors.New(`argument "path" must not be empty`)
	}
	return p, err
}

// resolve makes p absolute against cwd (absolute paths are kept).
func resolve(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(cwd, p)
}

func checkRead(args map[string]any) error {
	_, err := pathArg(args)
	return err
}

func runRead(_ context.Context, cwd string, args map[string]any) toolOutput {
	p, _ := pathArg(args)
	f, err := os.Open(resolve(cwd, p))
	if err != nil {
		return errorOutput("%v", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return errorOutput("%s is a directory", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return errorOutput("%v", err)
	}
	text := string(data)
	if len(data) > maxReadBytes {
		text = string(data[:maxReadBytes]) + fmt.Sprintf("\n[truncated at %d bytes]", maxReadBytes)
	}
	out := textOutput(text)
	out.render = &protocol.RenderDescriptor{Kind: "code", Path: p, Text: text}
	return out
}

func checkWrite(args map[string]any) error {
	if _, err := pathArg(args); err != nil {
		return err
	}
	_, err := stringArg(args, "content")
	return err
}

func askWrite(args map[string]any) (string, []protocol.PermissionDetail) {
	p, _ := pathArg(args)
	return fmt.Sprintf("Allow write to %s?", p), []protocol.PermissionDetail{{Label: "path", Value: p, Format: "path"}}
}

func runWrite(_ context.Context, cwd string, args map[string]any) toolOutput {
	p, _ := pathArg(args)
	content, _ := stringArg(args, "content")
	abs := resolve(cwd, p)
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return errorOutput("%v", err)
	}
	if err := os.WriteFile(abs, []byte(content), 0o644); err != nil {
		return errorOutput("%v", err)
	}
	return textOutput(fmt.Sprintf("wrote %d bytes to %s", len(content), p))
}
