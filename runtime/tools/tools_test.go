package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// setup makes a temporary working directory holding files (relative path →
// content) and returns an Env rooted there.
func setup(t *testing.T, files map[string]string) Env {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Env{Cwd: dir}
}

// call checks args and runs the named tool.
func call(t *testing.T, env Env, name string, args map[string]any) Result {
	t.Helper()
	tool, ok := Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q): not found", name)
	}
	if err := tool.Check(args); err != nil {
		t.Fatalf("%s Check(%v): %v", name, args, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tool.Run(ctx, env, args)
}

func wantText(t *testing.T, res Result) string {
	t.Helper()
	if res.IsError || res.Content.Kind != ContentText {
		t.Fatalf("result = %+v, want a text result", res)
	}
	return res.Content.Text
}

func wantError(t *testing.T, res Result) string {
	t.Helper()
	if !res.IsError || res.Content.Kind != ContentError || res.Content.Message == "" {
		t.Fatalf("result = %+v, want an error result", res)
	}
	return res.Content.Message
}

func TestBuiltins(t *testing.T) {
	tools := Builtins()
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if want := []string{"read", "ls", "grep", "find", "write", "edit", "bash"}; !slices.Equal(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
	readOnly := map[string]bool{"read": true, "ls": true, "grep": true, "find": true}
	for _, tool := range tools {
		t.Run(tool.Name, func(t *testing.T) {
			if tool.ReadOnly != readOnly[tool.Name] {
				t.Errorf("ReadOnly = %v", tool.ReadOnly)
			}
			if tool.Description == "" || tool.Check == nil || tool.Ask == nil || tool.Preview == nil || tool.Run == nil {
				t.Errorf("incomplete tool: %+v", tool)
			}
			got, ok := Lookup(tool.Name)
			if !ok || got.Name != tool.Name {
				t.Errorf("Lookup(%q) = %v, %v", tool.Name, got.Name, ok)
			}
		})
	}
	if _, ok := Lookup("subagent"); ok {
		t.Error("Lookup(subagent) found a tool")
	}
}

func TestSchemas(t *testing.T) {
	required := map[string][]string{
		"read":  {"path"},
		"ls":    nil,
		"grep":  {"pattern"},
		"find":  {"pattern"},
		"write": {"path", "content"},
		"edit":  {"path", "old_string", "new_string"},
		"bash":  {"command"},
	}
	for _, tool := range Builtins() {
		t.Run(tool.Name, func(t *testing.T) {
			var s struct {
				Type       string `json:"type"`
				Properties map[string]struct {
					Type        string `json:"type"`
					Description string `json:"description"`
				} `json:"properties"`
				Required []string `json:"required"`
			}
			if err := json.Unmarshal(tool.Schema, &s); err != nil {
				t.Fatalf("schema is not JSON: %v", err)
			}
			if s.Type != "object" || len(s.Properties) == 0 {
				t.Fatalf("schema = %s", tool.Schema)
			}
			if !slices.Equal(s.Required, required[tool.Name]) {
				t.Errorf("required = %v, want %v", s.Required, required[tool.Name])
			}
			for _, r := range s.Required {
				if _, ok := s.Properties[r]; !ok {
					t.Errorf("required %q is not a property", r)
				}
			}
			for name, p := range s.Properties {
				if p.Type == "" || p.Description == "" {
					t.Errorf("property %q lacks type or description", name)
				}
			}
		})
	}
}

func TestCheckRejectsBadArgs(t *testing.T) {
	tests := []struct {
		tool string
		args map[string]any
	}{
		{"read", map[string]any{}},
		{"read", map[string]any{"path": 3}},
		{"read", map[string]any{"path": ""}},
		{"read", map[string]any{"path": "a", "offset": 0}},
		{"read", map[string]any{"path": "a", "limit": 1.5}},
		{"read", map[string]any{"path": "a", "limit": "many"}},
		{"ls", map[string]any{"path": true}},
		{"grep", map[string]any{}},
		{"grep", map[string]any{"pattern": "("}},
		{"grep", map[string]any{"pattern": "a", "ignore_case": "maybe"}},
		{"grep", map[string]any{"pattern": "a", "glob": "{a,b"}},
		{"find", map[string]any{"pattern": ""}},
		{"write", map[string]any{"path": "a"}},
		{"write", map[string]any{"content": "x"}},
		{"edit", map[string]any{"path": "a", "old_string": "", "new_string": "x"}},
		{"edit", map[string]any{"path": "a", "old_string": "x", "new_string": "x"}},
		{"edit", map[string]any{"path": "a", "old_string": "x"}},
		{"bash", map[string]any{}},
		{"bash", map[string]any{"command": "true", "timeout_ms": 0}},
		{"bash", map[string]any{"command": "true", "timeout_ms": 3600001}},
	}
	for _, tt := range tests {
		tool, _ := Lookup(tt.tool)
		err := tool.Check(tt.args)
		if !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("%s Check(%v) = %v, want ErrInvalidArgs", tt.tool, tt.args, err)
		}
		// Run without Check fails the same way instead of running.
		if res := tool.Run(context.Background(), Env{Cwd: t.TempDir()}, tt.args); !res.IsError {
			t.Errorf("%s Run(%v) = %+v, want an error", tt.tool, tt.args, res)
		}
	}
}

func TestCheckAcceptsLenientArgs(t *testing.T) {
	tests := []struct {
		tool string
		args map[string]any
	}{
		{"read", map[string]any{"path": "a", "offset": "2", "limit": json.Number("3")}},
		{"read", map[string]any{"path": "a", "offset": 2, "limit": int64(3), "extra": 1}},
		{"grep", map[string]any{"pattern": "a", "ignore_case": "true"}},
		{"ls", map[string]any{}},
		{"write", map[string]any{"path": "a", "content": ""}},
	}
	for _, tt := range tests {
		tool, _ := Lookup(tt.tool)
		if err := tool.Check(tt.args); err != nil {
			t.Errorf("%s Check(%v) = %v", tt.tool, tt.args, err)
		}
	}
}

func TestAskReadOnly(t *testing.T) {
	env := setup(t, nil)
	tests := []struct {
		tool   string
		args   map[string]any
		prompt string
		values []string
	}{
		{"read", map[string]any{"path": "./a/../b.go"}, "Allow reading b.go?", []string{"b.go"}},
		{"ls", map[string]any{}, "Allow listing the working directory?", []string{"."}},
		{"grep", map[string]any{"pattern": "x+", "glob": "*.go", "path": "src"}, "Allow searching src?", []string{"src", "x+", "*.go"}},
		{"find", map[string]any{"pattern": "*.md"}, "Allow searching the working directory?", []string{".", "*.md"}},
	}
	for _, tt := range tests {
		tool, _ := Lookup(tt.tool)
		prompt, details := tool.Ask(env, tt.args)
		var values []string
		for _, d := range details {
			values = append(values, d.Value)
		}
		if prompt != tt.prompt || !slices.Equal(values, tt.values) || details[0].Format != "path" {
			t.Errorf("%s Ask = %q, %+v", tt.tool, prompt, details)
		}
	}
}

func TestEnvDefaults(t *testing.T) {
	e := Env{}.WithDefaults()
	if e.BashTimeout != 2*time.Minute || e.MaxOutput != 64<<10 {
		t.Fatalf("defaults = %+v", e)
	}
	e = Env{BashTimeout: time.Second, MaxOutput: 10}.WithDefaults()
	if e.BashTimeout != time.Second || e.MaxOutput != 10 {
		t.Fatalf("explicit = %+v", e)
	}
}

func TestPaths(t *testing.T) {
	env := setup(t, map[string]string{"sub/a.txt": "hello\n"})
	for _, p := range []string{"sub/a.txt", "./sub/../sub/a.txt", filepath.Join(env.Cwd, "sub", "a.txt")} {
		res := call(t, env, "read", map[string]any{"path": p})
		if got := wantText(t, res); got != "hello\n" {
			t.Errorf("read %q = %q", p, got)
		}
		if res.Render.Path != "sub/a.txt" {
			t.Errorf("read %q render path = %q, want relative to Cwd", p, res.Render.Path)
		}
	}
	outside := setup(t, map[string]string{"b.txt": "x"})
	res := call(t, env, "read", map[string]any{"path": filepath.Join(outside.Cwd, "b.txt")})
	if res.Render.Path != filepath.ToSlash(filepath.Join(outside.Cwd, "b.txt")) {
		t.Errorf("outside render path = %q, want absolute", res.Render.Path)
	}
}
