package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// maxListEntries caps the entries ls and find return (and render).
const maxListEntries = 1000

const lsSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory to list, relative to the working directory or absolute. Default: the working directory."}
  },
  "additionalProperties": false
}`

func lsTool() Tool {
	return Tool{
		Name: NameLs,
		Description: "List a directory: one entry per line, sorted by name, directories marked with a trailing \"/\". " +
			"Hidden entries are included. Use find to search recursively.",
		Schema:   []byte(lsSchema),
		ReadOnly: true,
		Check: func(args map[string]any) error {
			_, err := optStringArg(args, "path", ".")
			return err
		},
		Ask:     askReadOnly("listing"),
		Preview: noPreview,
		Run:     runLs,
	}
}

func runLs(ctx context.Context, env Env, args map[string]any) Result {
	env = env.WithDefaults()
	p, err := optStringArg(args, "path", ".")
	if err != nil {
		return ErrorResult(err.Error())
	}
	abs, err := env.resolve(p)
	if err != nil {
		return ErrorResult(err.Error())
	}
	shown := env.display(abs)
	fi, err := os.Stat(abs)
	if err != nil {
		return ErrorResult(pathError(shown, err))
	}
	render := &protocol.RenderDescriptor{Kind: RenderPathList, Paths: []protocol.PathEntry{}}
	if !fi.IsDir() {
		render.Paths = append(render.Paths, protocol.PathEntry{Path: shown, Kind: "file"})
		res := TextResult(filepath.Base(abs))
		res.Render = render
		return res
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return ErrorResult(pathError(shown, err))
	}
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	if len(entries) == 0 {
		res := TextResult("(empty directory)")
		res.Render = render
		return res
	}
	var b strings.Builder
	for i, e := range entries {
		if i == maxListEntries {
			fmt.Fprintf(&b, "[… %d more entries not shown]\n", len(entries)-i)
			break
		}
		kind, name := "file", e.Name()
		if isDirEntry(abs, e) {
			kind, name = "dir", name+"/"
		}
		b.WriteString(name)
		b.WriteByte('\n')
		render.Paths = append(render.Paths, protocol.PathEntry{Path: env.display(filepath.Join(abs, e.Name())), Kind: kind})
	}
	text, _ := Truncate(b.String(), env.MaxOutput)
	res := TextResult(text)
	res.Render = render
	return res
}

// isDirEntry reports whether e, an entry of dir, is a directory or a
// symbolic link to one.
func isDirEntry(dir string, e os.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&os.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && fi.IsDir()
}
