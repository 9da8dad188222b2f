package skills_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/runtime/skills"
)

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name, "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParse(t *testing.T) {
	s, err := skills.Parse([]byte("---\nname: pdf-forms\ndescription: >\n  Fill PDF forms.\n  Use for PDFs.\nlicense: MIT\n---\n\n# Steps\n1. Read it.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "pdf-forms" || s.Description != "Fill PDF forms. Use for PDFs." || s.Body != "# Steps\n1. Read it." {
		t.Fatalf("parsed %+v", s)
	}
	if s, err := skills.Parse([]byte("---\r\nname: x\r\ndescription: \"d: e\"\r\n---")); err != nil || s.Description != "d: e" || s.Body != "" {
		t.Fatalf("CRLF, no body: %+v %v", s, err)
	}
	for name, text := range map[string]string{
		"no front matter":  "# just markdown\n",
		"unclosed":         "---\nname: x\ndescription: d\n",
		"no description":   "---\nname: x\n---\nbody",
		"bad name":         "---\nname: ../x\ndescription: d\n---\n",
		"upper-case name":  "---\nname: Pdf\ndescription: d\n---\n",
		"not yaml":         "---\nname: [x\ndescription: d\n---\n",
		"long description": "---\nname: x\ndescription: " + strings.Repeat("d", skills.MaxDescription+1) + "\n---\n",
	} {
		if _, err := skills.Parse([]byte(text)); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
}

// TestFind: the project's folders come before the home's, in ProjectDirs
// order; a missing skill is ErrNotFound, a name that is a path or a file
// whose name differs from its folder's is ErrInvalid.
func TestFind(t *testing.T) {
	cwd, home := t.TempDir(), t.TempDir()
	dirs := skills.Dirs(cwd, home)
	if len(dirs) != 4 || dirs[0] != filepath.Join(cwd, ".shard/skills") || dirs[3] != filepath.Join(home, "skills") {
		t.Fatalf("dirs %v", dirs)
	}
	write(t, filepath.Join(home, "skills"), "deploy", "---\nname: deploy\ndescription: home deploy\n---\nhome body")
	want := write(t, filepath.Join(cwd, ".claude/skills"), "deploy", "---\nname: deploy\ndescription: claude deploy\n---\nclaude body")
	write(t, filepath.Join(home, "skills"), "only-home", "---\nname: only-home\ndescription: h\n---\n")
	write(t, filepath.Join(cwd, ".agents/skills"), "wrong", "---\nname: other\ndescription: h\n---\n")

	s, err := skills.Find(dirs, "deploy")
	if err != nil || s.Path != want || s.Body != "claude body" || s.Description != "claude deploy" {
		t.Fatalf("deploy: %+v %v", s, err)
	}
	if s, err := skills.Find(dirs, "only-home"); err != nil || s.Name != "only-home" {
		t.Fatalf("only-home: %+v %v", s, err)
	}
	if _, err := skills.Find(dirs, "missing"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	for _, n := range []string{"../deploy", "wrong", "", "a/b"} {
		if _, err := skills.Find(dirs, n); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", n, err)
		}
	}
	if err := skills.Check(dirs, []string{"deploy", "only-home"}); err != nil {
		t.Fatal(err)
	}
	if err := skills.Check(dirs, []string{"deploy", "nope"}); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("check: %v", err)
	}
	big := write(t, filepath.Join(cwd, ".shard/skills"), "big", "---\nname: big\ndescription: d\n---\n"+strings.Repeat("x", skills.MaxFile))
	if _, err := skills.Load(big); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("big: %v", err)
	}
}

// FuzzParse: Parse never panics, and what it accepts has a valid name and
// a bounded, non-empty description.
func FuzzParse(f *testing.F) {
	f.Add([]byte("---\nname: x\ndescription: d\n---\nbody"))
	f.Add([]byte("---\nname: x\ndescription: |\n  a\n  b\n---"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("\ufeff---\r\nname: a-b\r\ndescription: c\r\n---\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := skills.Parse(data)
		if err != nil {
			return
		}
		if !skills.ValidName(s.Name) || s.Description == "" || len(s.Description) > skills.MaxDescription {
			t.Fatalf("accepted %+v", s)
		}
	})
}
