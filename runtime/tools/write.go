package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/shard-dev/shard/protocol"
)

// Diff limits of write and edit.
const (
	// maxDiffSource: an existing file larger than this is not diffed
	// (write) or not edited (edit).
	maxDiffSource = 8 << 20
	// askPreviewLen caps the diff or content shown in a permission request.
	askPreviewLen = 4 << 10
)

const writeSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to write, relative to the working directory or absolute. Missing parent directories are created."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`

func writeTool() Tool {
	return Tool{
		Name: NameWrite,
		Description: "Write a file: create it, or replace all of its content. Missing parent directories are created; " +
			"an existing file keeps its permissions. To change part of an existing file, prefer edit.",
		Schema: []byte(writeSchema),
		Check: func(args map[string]any) error {
			_, _, err := parseWriteArgs(args)
			return err
		},
		Ask:     askWrite,
		Preview: previewWrite,
		Run:     runWrite,
	}
}

func parseWriteArgs(args map[string]any) (path, content string, err error) {
	if path, err = nonEmptyArg(args, "path"); err != nil {
		return "", "", err
	}
	content, err = stringArg(args, "content")
	return path, content, err
}

// current is a file as write and edit find it before they change it.
type current struct {
	abs, shown string
	exists     bool
	text       string // when exists and diffable
	diffable   bool   // exists, not binary and at most maxDiffSource
	mode       fs.FileMode
}

// loadCurrent resolves p and reads the file there, if any.
func loadCurrent(env Env, p string) (current, error) {
	var c current
	abs, err := env.resolve(p)
	if err != nil {
		return c, err
	}
	c.abs, c.shown = abs, env.display(abs)
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, errors.New(pathError(c.shown, err))
	}
	if fi.IsDir() {
		return c, fmt.Errorf("%s is a directory", c.shown)
	}
	if !fi.Mode().IsRegular() {
		return c, fmt.Errorf("%s is not a regular file", c.shown)
	}
	c.exists, c.mode = true, fi.Mode().Perm()
	if fi.Size() > maxDiffSource {
		return c, nil
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return c, errors.New(pathError(c.shown, err))
	}
	if !isBinary(data[:min(len(data), sniffLen)]) {
		c.text, c.diffable = string(data), true
	}
	return c, nil
}

// render is the diff from c to next, nil when c cannot be diffed.
func (c current) render(next string, max int) *protocol.RenderDescriptor {
	if c.exists && !c.diffable {
		return nil
	}
	return diffRender(c.shown, c.text, next, max)
}

// preview is the unified diff from c to next for a permission request,
// or a note when there is none to show.
func (c current) preview(next string) string {
	if c.exists && !c.diffable {
		return fmt.Sprintf("(existing file is binary or over %d bytes; no diff)", maxDiffSource)
	}
	hunks := diffHunks(c.text, next)
	if len(hunks) == 0 {
		return "(no changes)"
	}
	text, _ := Truncate(unified(c.shown, hunks), askPreviewLen)
	return text
}

func askWrite(env Env, args map[string]any) (string, []protocol.PermissionDetail) {
	p, content, _ := parseWriteArgs(args)
	c, err := loadCurrent(env, p)
	if err != nil {
		return fmt.Sprintf("Allow write to %s?", p), []protocol.PermissionDetail{{Label: "path", Value: p, Format: "path"}}
	}
	details := []protocol.PermissionDetail{{Label: "path", Value: c.shown, Format: "path"}}
	if c.exists {
		details = append(details, protocol.PermissionDetail{Label: "diff", Value: c.preview(content), Format: "code"})
	} else {
		text, _ := Truncate(content, askPreviewLen)
		details = append(details, protocol.PermissionDetail{Label: "new file", Value: text, Format: "code"})
	}
	return fmt.Sprintf("Allow write to %s?", c.shown), details
}

func previewWrite(env Env, args map[string]any) *protocol.RenderDescriptor {
	p, content, err := parseWriteArgs(args)
	if err != nil {
		return nil
	}
	c, err := loadCurrent(env, p)
	if err != nil {
		return nil
	}
	return c.render(content, env.WithDefaults().MaxOutput)
}

func runWrite(ctx context.Context, env Env, args map[string]any) Result {
	env = env.WithDefaults()
	p, content, err := parseWriteArgs(args)
	if err != nil {
		return ErrorResult(err.Error())
	}
	c, err := loadCurrent(env, p)
	if err != nil {
		return ErrorResult(err.Error())
	}
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	if c.exists && c.diffable && c.text == content {
		res := TextResult(fmt.Sprintf("%s already has this content; nothing written", c.shown))
		res.Render = c.render(content, env.MaxOutput)
		return res
	}
	if err := os.MkdirAll(filepath.Dir(c.abs), 0o755); err != nil {
		return ErrorResult(pathError(env.display(filepath.Dir(c.abs)), err))
	}
	mode := c.mode
	if !c.exists {
		mode = 0o644
	}
	if err := os.WriteFile(c.abs, []byte(content), mode); err != nil {
		return ErrorResult(pathError(c.shown, err))
	}
	msg := fmt.Sprintf("Wrote %d bytes to %s", len(content), c.shown)
	if !c.exists {
		msg = fmt.Sprintf("Created %s (%d bytes)", c.shown, len(content))
	}
	res := TextResult(msg)
	res.Render = c.render(content, env.MaxOutput)
	return res
}
