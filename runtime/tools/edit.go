package tools

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

const editSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to edit, relative to the working directory or absolute."},
    "old_string": {"type": "string", "description": "Exact text to replace, including whitespace and indentation. It must occur exactly once in the file unless replace_all is true; include surrounding lines to make it unique."},
    "new_string": {"type": "string", "description": "Text to put in its place; must differ from old_string."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence of old_string. Default false."}
  },
  "required": ["path", "old_string", "new_string"],
  "additionalProperties": false
}`

func editTool() Tool {
	return Tool{
		Name: NameEdit,
		Description: "Edit a file by exact string replacement: old_string is replaced with new_string. old_string must " +
			"match the file exactly (whitespace included) and occur exactly once, unless replace_all is set. " +
			"Read the file first; use write to create a file.",
		Schema: []byte(editSchema),
		Check: func(args map[string]any) error {
			_, err := parseEditArgs(args)
			return err
		},
		Ask:     askEdit,
		Preview: previewEdit,
		Run:     runEdit,
	}
}

type editArgs struct {
	path, old, new string
	all            bool
}

func parseEditArgs(args map[string]any) (editArgs, error) {
	var a editArgs
	var err error
	if a.path, err = nonEmptyArg(args, "path"); err != nil {
		return a, err
	}
	if a.old, err = nonEmptyArg(args, "old_string"); err != nil {
		return a, err
	}
	if a.new, err = stringArg(args, "new_string"); err != nil {
		return a, err
	}
	if a.old == a.new {
		return a, fmt.Errorf("%w: old_string and new_string are identical", ErrInvalidArgs)
	}
	a.all, err = optBoolArg(args, "replace_all")
	return a, err
}

// applyEdit loads the file and computes its edited text. A file that uses
// CRLF line endings also matches an old_string written with LF ones.
func applyEdit(env Env, a editArgs) (c current, next string, n int, err error) {
	if c, err = loadCurrent(env, a.path); err != nil {
		return c, "", 0, err
	}
	switch {
	case !c.exists:
		return c, "", 0, fmt.Errorf("%s does not exist; use write to create it", c.shown)
	case !c.diffable:
		return c, "", 0, fmt.Errorf("%s is binary or over %d bytes; edit only changes text files", c.shown, maxDiffSource)
	}
	old, new := a.old, a.new
	n = strings.Count(c.text, old)
	if n == 0 && strings.Contains(c.text, "\r\n") && !strings.Contains(old, "\r\n") {
		crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
		if m := strings.Count(c.text, crlf(old)); m > 0 {
			old, new, n = crlf(old), crlf(new), m
		}
	}
	switch {
	case n == 0:
		return c, "", 0, fmt.Errorf("old_string was not found in %s; it must match exactly, whitespace included", c.shown)
	case n > 1 && !a.all:
		return c, "", n, fmt.Errorf("old_string occurs %d times in %s; add surrounding context to make it unique, or set replace_all to replace every occurrence", n, c.shown)
	}
	if a.all {
		return c, strings.ReplaceAll(c.text, old, new), n, nil
	}
	return c, strings.Replace(c.text, old, new, 1), 1, nil
}

func askEdit(env Env, args map[string]any) (string, []protocol.PermissionDetail) {
	a, _ := parseEditArgs(args)
	c, next, _, err := applyEdit(env, a)
	shown := c.shown
	if shown == "" {
		shown = a.path
	}
	details := []protocol.PermissionDetail{{Label: "path", Value: shown, Format: "path"}}
	if err == nil {
		details = append(details, protocol.PermissionDetail{Label: "diff", Value: c.preview(next), Format: "code"})
	} else {
		oldText, _ := Truncate(a.old, askPreviewLen/2)
		newText, _ := Truncate(a.new, askPreviewLen/2)
		details = append(details,
			protocol.PermissionDetail{Label: "replace", Value: oldText, Format: "code"},
			protocol.PermissionDetail{Label: "with", Value: newText, Format: "code"})
	}
	return fmt.Sprintf("Allow edit of %s?", shown), details
}

func previewEdit(env Env, args map[string]any) *protocol.RenderDescriptor {
	a, err := parseEditArgs(args)
	if err != nil {
		return nil
	}
	c, next, _, err := applyEdit(env, a)
	if err != nil {
		return nil
	}
	return c.render(next, env.WithDefaults().MaxOutput)
}

func runEdit(ctx context.Context, env Env, args map[string]any) Result {
	env = env.WithDefaults()
	a, err := parseEditArgs(args)
	if err != nil {
		return ErrorResult(err.Error())
	}
	c, next, n, err := applyEdit(env, a)
	if err != nil {
		return ErrorResult(err.Error())
	}
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	if err := os.WriteFile(c.abs, []byte(next), c.mode); err != nil {
		return ErrorResult(pathError(c.shown, err))
	}
	unit := "occurrences"
	if n == 1 {
		unit = "occurrence"
	}
	res := TextResult(fmt.Sprintf("Edited %s: replaced %d %s", c.shown, n, unit))
	res.Render = c.render(next, env.MaxOutput)
	return res
}
