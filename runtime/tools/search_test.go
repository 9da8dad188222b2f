package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// tree is a small project with a .git directory that searches must skip.
func tree(t *testing.T) Env {
	t.Helper()
	env := setup(t, map[string]string{
		"main.go":            "package main\n\nfunc main() {\n\tHello()\n}\n",
		"README.md":          "# Hello\n",
		".hidden":            "hello hidden\n",
		"cmd/tool/main.go":   "package main // Hello tool\n",
		"cmd/tool/util.go":   "package main\n",
		"pkg/a/a.go":         "package a\n\nfunc Hello() {}\n",
		"pkg/a/a_test.go":    "package a\n",
		"pkg/b/b.ts":         "export const hello = 1;\n",
		"pkg/b/b.tsx":        "export const HELLO = 2;\n",
		"bin/blob":           "Hello\x00binary",
		".git/HEAD":          "ref: Hello\n",
		".git/objects/x.go":  "Hello\n",
		"vendor/.git/config": "Hello\n",
	})
	big := strings.Repeat("Hello padding\n", (1<<20)/14+10)
	if err := os.WriteFile(filepath.Join(env.Cwd, "big.log"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	return env
}

func pathsOf(r *protocol.RenderDescriptor) []string {
	var out []string
	for _, p := range r.Paths {
		out = append(out, p.Path)
	}
	return out
}

func TestLs(t *testing.T) {
	env := tree(t)
	res := call(t, env, "ls", map[string]any{})
	want := ".git/\n.hidden\nREADME.md\nbig.log\nbin/\ncmd/\nmain.go\npkg/\nvendor/\n"
	if got := wantText(t, res); got != want {
		t.Fatalf("text = %q, want %q", got, want)
	}
	r := res.Render
	if r.Kind != "path_list" || len(r.Paths) != 9 || r.Paths[4] != (protocol.PathEntry{Path: "bin", Kind: "dir"}) ||
		r.Paths[2] != (protocol.PathEntry{Path: "README.md", Kind: "file"}) {
		t.Fatalf("render = %+v", r)
	}

	res = call(t, env, "ls", map[string]any{"path": "pkg/a"})
	if got := wantText(t, res); got != "a.go\na_test.go\n" {
		t.Fatalf("pkg/a text = %q", got)
	}
	if got := pathsOf(res.Render); !slices.Equal(got, []string{"pkg/a/a.go", "pkg/a/a_test.go"}) {
		t.Fatalf("pkg/a paths = %v", got)
	}

	if err := os.Mkdir(filepath.Join(env.Cwd, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := wantText(t, call(t, env, "ls", map[string]any{"path": "empty"})); got != "(empty directory)" {
		t.Fatalf("empty = %q", got)
	}
	if got := wantText(t, call(t, env, "ls", map[string]any{"path": "main.go"})); got != "main.go" {
		t.Fatalf("file = %q", got)
	}
	wantError(t, call(t, env, "ls", map[string]any{"path": "missing"}))
}

func TestGrep(t *testing.T) {
	env := tree(t)
	t.Run("recursive", func(t *testing.T) {
		res := call(t, env, "grep", map[string]any{"pattern": `Hello\(`})
		want := "main.go:4: \tHello()\npkg/a/a.go:3: func Hello() {}\n"
		if got := wantText(t, res); got != want {
			t.Fatalf("text = %q, want %q", got, want)
		}
		wantPaths := []protocol.PathEntry{
			{Path: "main.go", Kind: "file", Hint: "Hello()"},
			{Path: "pkg/a/a.go", Kind: "file", Hint: "func Hello() {}"},
		}
		if res.Render.Kind != "path_list" || !slices.Equal(res.Render.Paths, wantPaths) {
			t.Fatalf("render = %+v", res.Render)
		}
	})
	t.Run("skips .git, binary and big files", func(t *testing.T) {
		got := wantText(t, call(t, env, "grep", map[string]any{"pattern": "Hello"}))
		for _, skipped := range []string{".git", "bin/blob", "big.log"} {
			if strings.Contains(got, skipped) {
				t.Errorf("output mentions %s:\n%s", skipped, got)
			}
		}
		if !strings.Contains(got, "README.md:1: # Hello") {
			t.Errorf("output = %q", got)
		}
	})
	t.Run("ignore case and glob", func(t *testing.T) {
		got := wantText(t, call(t, env, "grep", map[string]any{"pattern": "hello", "ignore_case": true, "glob": "*.{ts,tsx}"}))
		if want := "pkg/b/b.ts:1: export const hello = 1;\npkg/b/b.tsx:1: export const HELLO = 2;\n"; got != want {
			t.Fatalf("text = %q, want %q", got, want)
		}
		got = wantText(t, call(t, env, "grep", map[string]any{"pattern": "Hello", "glob": "cmd/**/*.go"}))
		if want := "cmd/tool/main.go:1: package main // Hello tool\n"; got != want {
			t.Fatalf("path glob text = %q", got)
		}
	})
	t.Run("under a path", func(t *testing.T) {
		got := wantText(t, call(t, env, "grep", map[string]any{"pattern": "package", "path": "pkg/a"}))
		if want := "pkg/a/a.go:1: package a\npkg/a/a_test.go:1: package a\n"; got != want {
			t.Fatalf("text = %q", got)
		}
		got = wantText(t, call(t, env, "grep", map[string]any{"pattern": "func", "path": "main.go"}))
		if want := "main.go:3: func main() {\n"; got != want {
			t.Fatalf("file text = %q", got)
		}
		wantError(t, call(t, env, "grep", map[string]any{"pattern": "x", "path": "bin/blob"}))
		wantError(t, call(t, env, "grep", map[string]any{"pattern": "x", "path": "nowhere"}))
	})
	t.Run("no match", func(t *testing.T) {
		res := call(t, env, "grep", map[string]any{"pattern": "zzz"})
		if got := wantText(t, res); got != "No matches found." || res.Render.Kind != "path_list" || len(res.Render.Paths) != 0 {
			t.Fatalf("result = %+v", res)
		}
	})
	t.Run("match cap", func(t *testing.T) {
		env := setup(t, map[string]string{"many.txt": strings.Repeat("x\n", maxGrepMatches+5)})
		res := call(t, env, "grep", map[string]any{"pattern": "x"})
		got := wantText(t, res)
		if strings.Count(got, "many.txt:") != maxGrepMatches || !strings.Contains(got, "match limit of 200 reached") {
			t.Fatalf("text = %q", got)
		}
		if len(res.Render.Paths) != maxGrepMatches {
			t.Fatalf("render paths = %d", len(res.Render.Paths))
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		tool, _ := Lookup("grep")
		msg := wantError(t, tool.Run(ctx, env, map[string]any{"pattern": "Hello"}))
		if !strings.Contains(msg, "cancelled") {
			t.Fatalf("message = %q", msg)
		}
	})
}

func TestFind(t *testing.T) {
	env := tree(t)
	tests := []struct {
		pattern, path string
		want          []string
	}{
		{"*.go", "", []string{"cmd/tool/main.go", "cmd/tool/util.go", "main.go", "pkg/a/a.go", "pkg/a/a_test.go"}},
		{"**/*.go", "", []string{"cmd/tool/main.go", "cmd/tool/util.go", "main.go", "pkg/a/a.go", "pkg/a/a_test.go"}},
		{"pkg/**/*_test.go", "", []string{"pkg/a/a_test.go"}},
		{"cmd/**", "", []string{"cmd/tool", "cmd/tool/main.go", "cmd/tool/util.go"}},
		{"*.{ts,tsx}", "pkg", []string{"pkg/b/b.ts", "pkg/b/b.tsx"}},
		{"?.go", "pkg", []string{"pkg/a/a.go"}},
		{"[ab]", "", []string{"pkg/a", "pkg/b"}},
		{"HEAD", "", nil},
		{"config", "", nil},
	}
	for _, tt := range tests {
		args := map[string]any{"pattern": tt.pattern}
		if tt.path != "" {
			args["path"] = tt.path
		}
		res := call(t, env, "find", args)
		got := wantText(t, res)
		if res.Render.Kind != "path_list" || !slices.Equal(pathsOf(res.Render), tt.want) {
			t.Errorf("find %q in %q: paths = %v, want %v", tt.pattern, tt.path, pathsOf(res.Render), tt.want)
		}
		if tt.want == nil && got != "No files found." {
			t.Errorf("find %q: text = %q", tt.pattern, got)
		}
	}
	res := call(t, env, "find", map[string]any{"pattern": "tool"})
	if got := wantText(t, res); got != "cmd/tool/\n" || res.Render.Paths[0].Kind != "dir" {
		t.Fatalf("dir result = %+v", res)
	}
	wantError(t, call(t, env, "find", map[string]any{"pattern": "*", "path": "main.go"}))
}

func TestFindCap(t *testing.T) {
	files := map[string]string{}
	for i := range maxListEntries + 3 {
		files[fmt.Sprintf("f%04d.txt", i)] = ""
	}
	env := setup(t, files)
	env.MaxOutput = 1 << 20
	res := call(t, env, "find", map[string]any{"pattern": "*.txt"})
	got := wantText(t, res)
	if len(res.Render.Paths) != maxListEntries || !strings.HasSuffix(got, "[result limit of 1000 paths reached; narrow the pattern or path]\n") {
		t.Fatalf("paths = %d, tail = %q", len(res.Render.Paths), got[len(got)-80:])
	}
}

func TestListingsTruncate(t *testing.T) {
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("file-%02d.txt", i)] = "needle\n"
	}
	env := setup(t, files)
	env.MaxOutput = 200
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"ls", map[string]any{}},
		{"find", map[string]any{"pattern": "*.txt"}},
		{"grep", map[string]any{"pattern": "needle"}},
	} {
		got := wantText(t, call(t, env, tc.tool, tc.args))
		i := strings.Index(got, "[… truncated ")
		if i < 0 || i > 200 || !strings.HasSuffix(got, "lines) …]") {
			t.Errorf("%s output = %q", tc.tool, got)
		}
	}
}
