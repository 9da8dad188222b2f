package tools

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

const findSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Glob matched against paths under path. Without \"/\" it matches base names at any depth (\"*.go\"); with \"/\" the whole relative path (\"cmd/**/main.go\"). Supports *, ?, [abc], {a,b} and ** (any number of directories)."},
    "path": {"type": "string", "description": "Directory to search, relative to the working directory or absolute. Default: the working directory."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

func findTool() Tool {
	return Tool{
		Name: NameFind,
		Description: fmt.Sprintf("Find files and directories by glob pattern, recursively, skipping .git. "+
			"Returns matching paths one per line in path order, directories marked with a trailing \"/\"; "+
			"at most %d paths are returned.", maxListEntries),
		Schema:   []byte(findSchema),
		ReadOnly: true,
		Check: func(args map[string]any) error {
			_, _, err := parseFindArgs(args)
			return err
		},
		Ask:     askReadOnly("searching"),
		Preview: noPreview,
		Run:     runFind,
	}
}

func parseFindArgs(args map[string]any) (glob, string, error) {
	pattern, err := nonEmptyArg(args, "pattern")
	if err != nil {
		return glob{}, "", err
	}
	g, err := compileGlob(pattern)
	if err != nil {
		return glob{}, "", err
	}
	p, err := optStringArg(args, "path", ".")
	return g, p, err
}

func runFind(ctx context.Context, env Env, args map[string]any) Result {
	env = env.WithDefaults()
	g, p, err := parseFindArgs(args)
	if err != nil {
		return ErrorResult(err.Error())
	}
	root, err := env.resolve(p)
	if err != nil {
		return ErrorResult(err.Error())
	}
	fi, err := os.Stat(root)
	if err != nil {
		return ErrorResult(pathError(env.display(root), err))
	}
	if !fi.IsDir() {
		return errorf("%s is not a directory", env.display(root))
	}
	var (
		b     strings.Builder
		paths []protocol.PathEntry
		more  bool
	)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			if path == root {
				return err
			}
			return nil // unreadable entries are skipped
		}
		if path == root {
			return nil
		}
		if d.IsDir() && skipDir(d.Name()) {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		if !g.match(filepath.ToSlash(rel)) {
			return nil
		}
		if len(paths) == maxListEntries {
			more = true
			return filepath.SkipAll
		}
		shown, kind := env.display(path), "file"
		if isDirEntry(filepath.Dir(path), d) {
			kind = "dir"
		}
		b.WriteString(shown)
		if kind == "dir" {
			b.WriteByte('/')
		}
		b.WriteByte('\n')
		paths = append(paths, protocol.PathEntry{Path: shown, Kind: kind})
		return nil
	})
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	if err != nil {
		return ErrorResult(pathError(env.display(root), err))
	}
	if len(paths) == 0 {
		res := TextResult("No files found.")
		res.Render = &protocol.RenderDescriptor{Kind: RenderPathList}
		return res
	}
	if more {
		fmt.Fprintf(&b, "[result limit of %d paths reached; narrow the pattern or path]\n", maxListEntries)
	}
	text, _ := Truncate(b.String(), env.MaxOutput)
	res := TextResult(text)
	res.Render = &protocol.RenderDescriptor{Kind: RenderPathList, Paths: paths}
	return res
}
