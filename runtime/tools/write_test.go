package tools

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func readFile(t *testing.T, env Env, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Cwd, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWrite(t *testing.T) {
	env := setup(t, map[string]string{"a.txt": "one\ntwo\nthree\n"})
	tool, _ := Lookup("write")

	t.Run("create with parents", func(t *testing.T) {
		args := map[string]any{"path": "new/dir/b.txt", "content": "hi\nthere\n"}
		prompt, details := tool.Ask(env, args)
		if prompt != "Allow write to new/dir/b.txt?" {
			t.Errorf("prompt = %q", prompt)
		}
		wantDetails := []protocol.PermissionDetail{
			{Label: "path", Value: "new/dir/b.txt", Format: "path"},
			{Label: "new file", Value: "hi\nthere\n", Format: "code"},
		}
		if !reflect.DeepEqual(details, wantDetails) {
			t.Errorf("details = %+v", details)
		}
		res := call(t, env, "write", args)
		if got := wantText(t, res); got != "Created new/dir/b.txt (9 bytes)" {
			t.Errorf("text = %q", got)
		}
		if got := readFile(t, env, "new/dir/b.txt"); got != "hi\nthere\n" {
			t.Errorf("file = %q", got)
		}
		want := &protocol.RenderDescriptor{Kind: "diff", Path: "new/dir/b.txt", Hunks: []protocol.Hunk{
			{OldStart: 0, OldLines: 0, NewStart: 1, NewLines: 2, Lines: []string{"+hi", "+there"}},
		}}
		if !reflect.DeepEqual(res.Render, want) {
			t.Errorf("render = %+v", res.Render)
		}
	})
	t.Run("overwrite keeps mode", func(t *testing.T) {
		if err := os.Chmod(filepath.Join(env.Cwd, "a.txt"), 0o600); err != nil {
			t.Fatal(err)
		}
		args := map[string]any{"path": "a.txt", "content": "one\n2\nthree\n"}
		preview := tool.Preview(env, args)
		_, details := tool.Ask(env, args)
		wantDiff := "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
		if len(details) != 2 || details[1] != (protocol.PermissionDetail{Label: "diff", Value: wantDiff, Format: "code"}) {
			t.Errorf("details = %+v", details)
		}
		res := call(t, env, "write", args)
		if got := wantText(t, res); got != "Wrote 12 bytes to a.txt" {
			t.Errorf("text = %q", got)
		}
		want := &protocol.RenderDescriptor{Kind: "diff", Path: "a.txt", Hunks: []protocol.Hunk{
			{OldStart: 1, OldLines: 3, NewStart: 1, NewLines: 3, Lines: []string{" one", "-two", "+2", " three"}},
		}}
		if !reflect.DeepEqual(res.Render, want) || !reflect.DeepEqual(preview, want) {
			t.Errorf("render = %+v, preview = %+v", res.Render, preview)
		}
		fi, err := os.Stat(filepath.Join(env.Cwd, "a.txt"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("mode = %v, %v", fi.Mode(), err)
		}
	})
	t.Run("unchanged", func(t *testing.T) {
		res := call(t, env, "write", map[string]any{"path": "a.txt", "content": "one\n2\nthree\n"})
		if got := wantText(t, res); !strings.Contains(got, "nothing written") || len(res.Render.Hunks) != 0 {
			t.Errorf("result = %+v", res)
		}
	})
	t.Run("directory", func(t *testing.T) {
		msg := wantError(t, call(t, env, "write", map[string]any{"path": "new", "content": "x"}))
		if msg != "new is a directory" {
			t.Errorf("message = %q", msg)
		}
	})
	t.Run("cancelled writes nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wantError(t, tool.Run(ctx, env, map[string]any{"path": "c.txt", "content": "x"}))
		if _, err := os.Stat(filepath.Join(env.Cwd, "c.txt")); !os.IsNotExist(err) {
			t.Errorf("c.txt exists: %v", err)
		}
	})
}

func TestEdit(t *testing.T) {
	src := "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	env := setup(t, map[string]string{"x.go": src, "crlf.txt": "a\r\nb\r\nc\r\n", "bin": "\x00\x01"})
	tool, _ := Lookup("edit")

	t.Run("not unique", func(t *testing.T) {
		msg := wantError(t, call(t, env, "edit", map[string]any{"path": "x.go", "old_string": "return 1", "new_string": "return 2"}))
		if !strings.Contains(msg, "occurs 2 times in x.go") || !strings.Contains(msg, "replace_all") {
			t.Errorf("message = %q", msg)
		}
		if readFile(t, env, "x.go") != src {
			t.Error("file changed")
		}
	})
	t.Run("not found", func(t *testing.T) {
		args := map[string]any{"path": "x.go", "old_string": "return 3", "new_string": "return 2"}
		msg := wantError(t, call(t, env, "edit", args))
		if !strings.Contains(msg, "not found in x.go") {
			t.Errorf("message = %q", msg)
		}
		if tool.Preview(env, args) != nil {
			t.Error("preview of a failing edit is not nil")
		}
		prompt, details := tool.Ask(env, args)
		if prompt != "Allow edit of x.go?" || len(details) != 3 || details[1].Value != "return 3" {
			t.Errorf("ask = %q, %+v", prompt, details)
		}
	})
	t.Run("unique", func(t *testing.T) {
		args := map[string]any{"path": "x.go", "old_string": "func b() {\n\treturn 1", "new_string": "func b() {\n\treturn 2"}
		prompt, details := tool.Ask(env, args)
		if prompt != "Allow edit of x.go?" || len(details) != 2 || details[0].Format != "path" || details[1].Format != "code" ||
			!strings.Contains(details[1].Value, "-\treturn 1\n+\treturn 2\n") {
			t.Errorf("ask = %q, %+v", prompt, details)
		}
		res := call(t, env, "edit", args)
		if got := wantText(t, res); got != "Edited x.go: replaced 1 occurrence" {
			t.Errorf("text = %q", got)
		}
		want := &protocol.RenderDescriptor{Kind: "diff", Path: "x.go", Hunks: []protocol.Hunk{{
			OldStart: 3, OldLines: 5, NewStart: 3, NewLines: 5,
			Lines: []string{" }", " ", " func b() {", "-\treturn 1", "+\treturn 2", " }"},
		}}}
		if !reflect.DeepEqual(res.Render, want) {
			t.Errorf("render = %+v\nwant %+v", res.Render, want)
		}
		if got := readFile(t, env, "x.go"); got != "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 2\n}\n" {
			t.Errorf("file = %q", got)
		}
	})
	t.Run("replace all", func(t *testing.T) {
		res := call(t, env, "edit", map[string]any{"path": "x.go", "old_string": "return", "new_string": "return -", "replace_all": true})
		if got := wantText(t, res); got != "Edited x.go: replaced 2 occurrences" {
			t.Errorf("text = %q", got)
		}
		if got := readFile(t, env, "x.go"); strings.Count(got, "return -") != 2 {
			t.Errorf("file = %q", got)
		}
		if len(res.Render.Hunks) != 1 || res.Render.Hunks[0].OldStart != 1 {
			t.Errorf("render = %+v", res.Render)
		}
	})
	t.Run("crlf", func(t *testing.T) {
		wantText(t, call(t, env, "edit", map[string]any{"path": "crlf.txt", "old_string": "a\nb", "new_string": "a\nB"}))
		if got := readFile(t, env, "crlf.txt"); got != "a\r\nB\r\nc\r\n" {
			t.Errorf("file = %q", got)
		}
	})
	t.Run("missing, binary", func(t *testing.T) {
		msg := wantError(t, call(t, env, "edit", map[string]any{"path": "nope.go", "old_string": "a", "new_string": "b"}))
		if !strings.Contains(msg, "does not exist") {
			t.Errorf("message = %q", msg)
		}
		msg = wantError(t, call(t, env, "edit", map[string]any{"path": "bin", "old_string": "\x01", "new_string": "b"}))
		if !strings.Contains(msg, "binary") {
			t.Errorf("message = %q", msg)
		}
	})
}
