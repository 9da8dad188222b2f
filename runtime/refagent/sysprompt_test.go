package refagent

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPromptContext: the system prompt carries the delegated prompt, the
// project instructions (AGENTS.md before CLAUDE.md, cut at
// maxInstructions with a note naming the file) and the skills found, each
// description on one line; a skill that is not there is left out.
func TestPromptContext(t *testing.T) {
	cwd, home := t.TempDir(), t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(cwd, "AGENTS.md"), "START "+strings.Repeat("a", maxInstructions)+" END")
	write(filepath.Join(cwd, "CLAUDE.md"), "CLAUDE")
	write(filepath.Join(home, "skills", "lint", "SKILL.md"), "---\nname: lint\ndescription: |\n  Lint the code.\n  Twice.\n---\nbody")

	p := loadPromptContext(Options{Identity: Identity{Cwd: cwd, Home: home, Skills: []string{"lint", "gone"},
		SystemPrompt: "  You are a subagent.  "}}, slog.New(slog.DiscardHandler))
	sys := p.system("BASE")
	for _, want := range []string{"BASE\n\n# Your assignment\n\nYou are a subagent.", "# Project instructions (AGENTS.md)\n\nSTART aaa",
		"[… cut at 32768 bytes; read " + filepath.Join(cwd, "AGENTS.md"), "- lint: Lint the code. Twice."} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	if strings.Contains(sys, " END") || strings.Contains(sys, "CLAUDE") || strings.Contains(sys, "gone") || len(p.skills) != 1 {
		t.Errorf("system prompt has what it should not:\n%s", sys[len(sys)-300:])
	}
	if got := (promptContext{}).system("BASE"); got != "BASE" {
		t.Errorf("empty context: %q", got)
	}
}
