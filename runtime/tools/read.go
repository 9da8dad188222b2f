package tools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

const readSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to read, relative to the working directory or absolute."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based). Default 1."},
    "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return. Default: to the end of the file."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

func readTool() Tool {
	return Tool{
		Name: NameRead,
		Description: "Read a text file. Returns the file's lines exactly as stored (no line numbers). " +
			"Use offset and limit (in lines) to read part of a large file; output longer than the limit is cut " +
			"with a note giving the offset to continue from. Directories and binary files are refused: use ls for directories.",
		Schema:   []byte(readSchema),
		ReadOnly: true,
		Check: func(args map[string]any) error {
			_, err := parseReadArgs(args)
			return err
		},
		Ask:     askReadOnly("reading"),
		Preview: noPreview,
		Run:     runRead,
	}
}

type readArgs struct {
	path          string
	offset, limit int64 // limit 0: to the end
}

func parseReadArgs(args map[string]any) (readArgs, error) {
	var a readArgs
	var err error
	if a.path, err = nonEmptyArg(args, "path"); err != nil {
		return a, err
	}
	if a.offset, err = optIntArg(args, "offset", 1, 1); err != nil {
		return a, err
	}
	a.limit, err = optIntArg(args, "limit", 0, 1)
	return a, err
}

func runRead(ctx context.Context, env Env, args map[string]any) Result {
	env = env.WithDefaults()
	a, err := parseReadArgs(args)
	if err != nil {
		return ErrorResult(err.Error())
	}
	abs, err := env.resolve(a.path)
	if err != nil {
		return ErrorResult(err.Error())
	}
	shown := env.display(abs)
	f, err := os.Open(abs)
	if err != nil {
		return ErrorResult(pathError(shown, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ErrorResult(pathError(shown, err))
	}
	if fi.IsDir() {
		return errorf("%s is a directory; use ls to list it", shown)
	}
	if !fi.Mode().IsRegular() {
		return errorf("%s is not a regular file", shown)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return ErrorResult(pathError(shown, err))
	}
	if isBinary(head) {
		return errorf("%s is a binary file (%d bytes); read only shows text", shown, fi.Size())
	}
	w, err := readWindow(ctx, br, a, env.MaxOutput)
	if err != nil {
		if ctx.Err() != nil {
			return cancelled(ctx)
		}
		return ErrorResult(pathError(shown, err))
	}
	if a.offset > 1 && a.offset > w.total {
		return errorf("offset %d is past the end of %s (%d lines)", a.offset, shown, w.total)
	}
	text := w.text
	sep := ""
	if text != "" && !strings.HasSuffix(text, "\n") {
		sep = "\n"
	}
	switch {
	case w.cutBytes > 0:
		text += sep + markerNote(w.cutBytes, w.cutLines, fmt.Sprintf("use offset=%d to read on", w.next))
	case a.limit > 0 && w.next <= w.total:
		text += sep + fmt.Sprintf("[lines %d-%d of %d; use offset=%d to read on]", a.offset, w.next-1, w.total, w.next)
	case w.total == 0:
		text = "(empty file)"
	}
	res := TextResult(text)
	res.Render = &protocol.RenderDescriptor{Kind: RenderCode, Path: shown, Text: w.text, Lang: langOf(abs)}
	return res
}

// window is the part of a file read returns.
type window struct {
	text string
	// total is the file's line count; next the first line not (wholly)
	// shown; cutBytes and cutLines what the output cap cut from the
	// requested window.
	total, next        int64
	cutBytes, cutLines int64
}

// readWindow reads the lines [offset, offset+limit) of r, keeping at most
// max bytes of them, and counts the rest of the file.
func readWindow(ctx context.Context, r *bufio.Reader, a readArgs, max int) (window, error) {
	var (
		w      window
		out    []byte
		full   bool // the output cap was reached
		lineNo int64
	)
	end := int64(-1)
	if a.limit > 0 {
		end = a.offset + a.limit // first line past the window
	}
	for {
		if lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return w, err
			}
		}
		keep := 0
		inWindow := lineNo+1 >= a.offset && (end < 0 || lineNo+1 < end)
		if inWindow && !full {
			keep = max - len(out) + 1
		}
		line, n, err := readLine(r, keep)
		if n == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return w, err
		}
		lineNo++
		switch {
		case !inWindow:
		case full:
			w.cutBytes += int64(n)
			w.cutLines++
		case len(out)+n <= max:
			out = append(out, line...)
			w.next = lineNo + 1
		default:
			full = true
			if len(out) == 0 {
				// Not even one line fits: show its start.
				cut := runeFloor(line, max)
				out = append(out, line[:cut]...)
				w.cutBytes += int64(n - cut)
				w.next = lineNo + 1
			} else {
				w.cutBytes += int64(n)
				w.next = lineNo
			}
			w.cutLines++
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return w, err
		}
	}
	if w.next == 0 {
		w.next = lineNo + 1
	}
	w.total, w.text = lineNo, string(out)
	return w, nil
}

// readLine reads one line of r (with its "\n", if any) and returns its
// first keep bytes (a copy) and its full length n. err is io.EOF at the end
// of the input, possibly together with a final line that has no newline.
func readLine(r *bufio.Reader, keep int) (line []byte, n int, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		n += len(chunk)
		if room := keep - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, n, err
		}
	}
}

// langOf guesses a code render's informational language from the file
// name (docs/protocol.md §11: lang is informational).
func langOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".go":
		return "go"
	case ".rs":
		return "rust"
	case ".py":
		return "python"
	case ".js", ".mjs", ".cjs":
		return "javascript"
	case ".ts", ".tsx":
		return "typescript"
	case ".java":
		return "java"
	case ".c", ".h":
		return "c"
	case ".cc", ".cpp", ".hpp":
		return "cpp"
	case ".rb":
		return "ruby"
	case ".sh", ".bash":
		return "bash"
	case ".json":
		return "json"
	case ".yaml", ".yml":
		return "yaml"
	case ".toml":
		return "toml"
	case ".md":
		return "markdown"
	case ".html":
		return "html"
	case ".css":
		return "css"
	case ".sql":
		return "sql"
	}
	return ""
}
