package tools

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// grep limits.
const (
	// maxGrepFileSize: larger files are skipped.
	maxGrepFileSize = 1 << 20
	// maxGrepMatches caps the matching lines returned.
	maxGrepMatches = 200
	// maxGrepLineLen caps the bytes shown of one matching line.
	maxGrepLineLen = 300
)

const grepSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Regular expression (Go RE2 syntax) matched against each line."},
    "path": {"type": "string", "description": "File or directory to search, relative to the working directory or absolute. Default: the working directory."},
    "glob": {"type": "string", "description": "Only search files matching this glob, e.g. \"*.go\" (base name at any depth) or \"src/**/*.ts\" (path under the search directory). Supports *, ?, [abc], {a,b} and **."},
    "ignore_case": {"type": "boolean", "description": "Match case-insensitively. Default false."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

func grepTool() Tool {
	return Tool{
		Name: NameGrep,
		Description: fmt.Sprintf("Search file contents with a regular expression (Go RE2 syntax). "+
			"Returns matching lines as \"path:line: text\", in path order. Searches recursively under path, "+
			"skipping .git, binary files and files over 1 MiB; at most %d matches are returned.", maxGrepMatches),
		Schema:   []byte(grepSchema),
		ReadOnly: true,
		Check: func(args map[string]any) error {
			_, err := parseGrepArgs(args)
			return err
		},
		Ask:     askReadOnly("searching"),
		Preview: noPreview,
		Run:     runGrep,
	}
}

type grepArgs struct {
	re   *regexp.Regexp
	path string
	glob *glob
}

func parseGrepArgs(args map[string]any) (grepArgs, error) {
	var a grepArgs
	pattern, err := nonEmptyArg(args, "pattern")
	if err != nil {
		return a, err
	}
	icase, err := optBoolArg(args, "ignore_case")
	if err != nil {
		return a, err
	}
	if icase {
		pattern = "(?i)" + pattern
	}
	if a.re, err = regexp.Compile(pattern); err != nil {
		return a, fmt.Errorf("%w: pattern: %w", ErrInvalidArgs, err)
	}
	if a.path, err = optStringArg(args, "path", "."); err != nil {
		return a, err
	}
	g, err := optStringArg(args, "glob", "")
	if err != nil || g == "" {
		return a, err
	}
	compiled, err := compileGlob(g)
	if err != nil {
		return a, err
	}
	a.glob = &compiled
	return a, nil
}

func runGrep(ctx context.Context, env Env, args map[string]any) Result {
	env = env.WithDefaults()
	a, err := parseGrepArgs(args)
	if err != nil {
		return ErrorResult(err.Error())
	}
	root, err := env.resolve(a.path)
	if err != nil {
		return ErrorResult(err.Error())
	}
	fi, err := os.Stat(root)
	if err != nil {
		return ErrorResult(pathError(env.display(root), err))
	}
	var (
		b       strings.Builder
		paths   []protocol.PathEntry
		matches int
		more    bool
	)
	// search greps one file; it returns false once the match cap is hit.
	search := func(file string) bool {
		data, ok := grepRead(file)
		if !ok {
			return true
		}
		shown := env.display(file)
		lineNo := 0
		for line := range strings.Lines(data) {
			lineNo++
			line = strings.TrimRight(line, "\r\n")
			if !a.re.MatchString(line) {
				continue
			}
			if matches == maxGrepMatches {
				more = true
				return false
			}
			matches++
			text := clip(line, maxGrepLineLen)
			fmt.Fprintf(&b, "%s:%d: %s\n", shown, lineNo, text)
			paths = append(paths, protocol.PathEntry{Path: shown, Kind: "file", Hint: clip(strings.TrimSpace(line), maxGrepLineLen)})
		}
		return true
	}
	if !fi.IsDir() {
		if _, ok := grepRead(root); !ok {
			return errorf("%s was not searched: grep skips binary files, special files and files over 1 MiB", env.display(root))
		}
		search(root)
	} else {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			if err != nil {
				if p == root {
					return err
				}
				return nil // unreadable entries are skipped
			}
			if d.IsDir() {
				if p != root && skipDir(d.Name()) {
					return filepath.SkipDir
				}
				return nil
			}
			if a.glob != nil {
				rel, _ := filepath.Rel(root, p)
				if !a.glob.match(filepath.ToSlash(rel)) {
					return nil
				}
			}
			if !search(p) {
				return filepath.SkipAll
			}
			return nil
		})
	}
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	if err != nil {
		return ErrorResult(pathError(env.display(root), err))
	}
	if matches == 0 {
		res := TextResult("No matches found.")
		res.Render = &protocol.RenderDescriptor{Kind: RenderPathList}
		return res
	}
	if more {
		fmt.Fprintf(&b, "[match limit of %d reached; narrow the pattern, path or glob]\n", maxGrepMatches)
	}
	text, _ := Truncate(b.String(), env.MaxOutput)
	res := TextResult(text)
	res.Render = &protocol.RenderDescriptor{Kind: RenderPathList, Paths: paths}
	return res
}

// grepRead returns the text of a file grep searches; ok is false for files
// it skips: not regular (after symlinks), over maxGrepFileSize, binary or
// unreadable.
func grepRead(file string) (string, bool) {
	fi, err := os.Stat(file)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxGrepFileSize {
		return "", false
	}
	data, err := os.ReadFile(file)
	if err != nil || len(data) > maxGrepFileSize || isBinary(data[:min(len(data), sniffLen)]) {
		return "", false
	}
	return string(bytes.ToValidUTF8(data, []byte("\uFFFD"))), true
}

// clip shortens s to at most n bytes (at a rune boundary), marking the cut
// with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:runeFloor([]byte(s), n)] + "…"
}
