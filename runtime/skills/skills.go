// Package skills finds and reads agent skills in the Agent Skills format: a
// folder named after the skill holding SKILL.md, a YAML front matter with
// `name` and `description`, then a markdown body of instructions
// (docs/protocol.md §13, skills).
//
// A skill is looked up by name in the project first, then in the user's
// Shard home: <cwd>/.shard/skills, <cwd>/.agents/skills, <cwd>/.claude/skills
// (so skills written for Claude Code work unchanged), then
// $SHARD_HOME/skills. The first folder that has <name>/SKILL.md wins.
//
// The daemon uses it to refuse an agent.create that names a skill which does
// not exist (NOT_FOUND) or cannot be read; the reference runtime uses it to
// put each skill's name and description in the system prompt and to return
// its body from the skill tool. It imports nothing of Shard, so both can.
package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits on what a skill may hold. A SKILL.md is meant to be read whole by
// the model, so it is small; the description goes into every system prompt.
const (
	// MaxFile bounds a SKILL.md (front matter and body).
	MaxFile = 64 << 10
	// MaxDescription bounds the description (the Agent Skills format's
	// own limit).
	MaxDescription = 1024
	// MaxName bounds a skill's name (the format's own limit).
	MaxName = 64
)

// ErrNotFound is wrapped by Find when no folder has the skill.
var ErrNotFound = errors.New("skills: no such skill")

// ErrInvalid is wrapped by Find and Load for a skill name that is not one,
// and for a SKILL.md that cannot be used: too large, no front matter, no
// description, a name that differs from its folder's.
var ErrInvalid = errors.New("skills: invalid skill")

// namePattern is the format's rule for names: lowercase letters, digits
// and hyphens, not starting or ending with a hyphen. It also keeps a name
// from naming a path.
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// ProjectDirs are the folders under an agent's working directory that hold
// its project's skills, in lookup order.
var ProjectDirs = []string{".shard/skills", ".agents/skills", ".claude/skills"}

// Skill is one skill found on disk.
type Skill struct {
	// Name is the skill's name: its folder's name, and its front matter's.
	Name string
	// Description says what the skill is for and when to use it; the model
	// sees it in the system prompt.
	Description string
	// Path is the SKILL.md file; its folder may hold more files the body
	// refers to.
	Path string
	// Body is the markdown after the front matter: the instructions.
	Body string
}

// Dirs are the folders skills are looked up in, in order, for an agent
// working in cwd under the Shard home home ("" leaves it out).
func Dirs(cwd, home string) []string {
	var out []string
	if cwd != "" {
		for _, d := range ProjectDirs {
			out = append(out, filepath.Join(cwd, d))
		}
	}
	if home != "" {
		out = append(out, filepath.Join(home, "skills"))
	}
	return out
}

// ValidName reports whether name may name a skill.
func ValidName(name string) bool {
	return len(name) <= MaxName && namePattern.MatchString(name)
}

// Find looks name up in dirs (as Dirs returns them) and loads the first
// SKILL.md found. It fails with ErrInvalid for a name that is not one or a
// SKILL.md that cannot be used, and with ErrNotFound when no folder has it.
func Find(dirs []string, name string) (Skill, error) {
	if !ValidName(name) {
		return Skill{}, fmt.Errorf("%w: %q is not a skill name (lowercase letters, digits and hyphens, at most %d)", ErrInvalid, name, MaxName)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name, "SKILL.md")
		s, err := Load(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		return s, err
	}
	return Skill{}, fmt.Errorf("%w: %q", ErrNotFound, name)
}

// Check finds every name in dirs and returns the first failure.
func Check(dirs []string, names []string) error {
	for _, n := range names {
		if _, err := Find(dirs, n); err != nil {
			return err
		}
	}
	return nil
}

// Load reads the SKILL.md at path. A missing file fails with an error
// wrapping os.ErrNotExist.
func Load(path string) (Skill, error) {
	f, err := os.Open(path)
	if err != nil {
		return Skill{}, fmt.Errorf("skills: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return Skill{}, fmt.Errorf("skills: read %s: %w", path, err)
	}
	if len(data) > MaxFile {
		return Skill{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalid, path, MaxFile)
	}
	s, err := Parse(data)
	if err != nil {
		return Skill{}, fmt.Errorf("%s: %w", path, err)
	}
	if dir := filepath.Base(filepath.Dir(path)); s.Name != dir {
		return Skill{}, fmt.Errorf("%w: %s names the skill %q, not its folder's name %q", ErrInvalid, path, s.Name, dir)
	}
	s.Path = path
	return s, nil
}

// Parse reads a SKILL.md: a front matter between lines of "---" with a
// name and a description, then the body.
func Parse(data []byte) (Skill, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return Skill{}, fmt.Errorf("%w: no front matter (the file must start with a line of ---)", ErrInvalid)
	}
	front, body, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		if front, ok = strings.CutSuffix(rest, "\n---"); !ok {
			return Skill{}, fmt.Errorf("%w: the front matter has no closing line of ---", ErrInvalid)
		}
		body = ""
	}
	var fm struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	}
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		return Skill{}, fmt.Errorf("%w: front matter: %v", ErrInvalid, err)
	}
	fm.Name, fm.Description = strings.TrimSpace(fm.Name), strings.TrimSpace(fm.Description)
	switch {
	case !ValidName(fm.Name):
		return Skill{}, fmt.Errorf("%w: front matter name %q is not a skill name", ErrInvalid, fm.Name)
	case fm.Description == "":
		return Skill{}, fmt.Errorf("%w: front matter has no description", ErrInvalid)
	case len(fm.Description) > MaxDescription:
		return Skill{}, fmt.Errorf("%w: description is longer than %d bytes", ErrInvalid, MaxDescription)
	}
	return Skill{Name: fm.Name, Description: fm.Description, Body: strings.TrimSpace(body)}, nil
}
