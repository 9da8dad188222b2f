package refagent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/shard-dev/shard/runtime/skills"
)

// Project instructions: the file a project keeps for coding agents, read
// from the working directory when the runtime starts. AGENTS.md is the
// common name; CLAUDE.md is read where there is no AGENTS.md, so a project
// set up for Claude Code gets its instructions too.
var instructionFiles = []string{"AGENTS.md", "CLAUDE.md"}

// maxInstructions bounds the project instructions put in the system
// prompt; the rest is cut with a note saying where to read it whole.
const maxInstructions = 32 << 10

// promptContext is what the system prompt carries besides the runtime's
// own text: the delegated prompt of a subagent, the project's
// instructions and the agent's skills. It is read once, when the runtime
// starts (a changed AGENTS.md or skill description applies from the next
// runtime generation), and is immutable after, so it is read without a
// lock.
type promptContext struct {
	delegated    string
	instrFile    string // the instruction file's path; "" when there is none
	instructions string
	skills       []skills.Skill
}

// loadPromptContext reads the project instructions in opts.Cwd and the
// skills opts.Skills names. What cannot be read is logged (by name, never
// by content) and left out: an agent whose AGENTS.md became unreadable
// still starts.
func loadPromptContext(opts Options, log *slog.Logger) promptContext {
	p := promptContext{delegated: strings.TrimSpace(opts.SystemPrompt)}
	if opts.Cwd != "" {
		for _, name := range instructionFiles {
			path := filepath.Join(opts.Cwd, name)
			text, err := readBounded(path, maxInstructions)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				log.Warn("project instructions not read", "file", name, slog.Any("err", err))
				break
			}
			p.instrFile, p.instructions = path, text
			break
		}
	}
	dirs := skills.Dirs(opts.Cwd, opts.Home)
	for _, name := range opts.Skills {
		s, err := skills.Find(dirs, name)
		if err != nil {
			log.Warn("skill left out", "skill", name, slog.Any("err", err))
			continue
		}
		p.skills = append(p.skills, s)
	}
	return p
}

// readBounded reads at most limit bytes of path, with a note when there was
// more.
func readBounded(path string, limit int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return "", err
	}
	text := string(data)
	if len(data) > limit {
		text = strings.ToValidUTF8(text[:limit], "") +
			fmt.Sprintf("\n[… cut at %d bytes; read %s for the rest]", limit, path)
	}
	return strings.TrimSpace(text), nil
}

// system is the system prompt: base (the runtime's own, systemPrompt),
// then the delegated prompt, the project's instructions and the list of
// skills, each under a heading of its own.
func (p promptContext) system(base string) string {
	var sb strings.Builder
	sb.WriteString(base)
	if p.delegated != "" {
		sb.WriteString("\n\n# Your assignment\n\n")
		sb.WriteString(p.delegated)
	}
	if p.instructions != "" {
		fmt.Fprintf(&sb, "\n\n# Project instructions (%s)\n\n", filepath.Base(p.instrFile))
		sb.WriteString(p.instructions)
	}
	if len(p.skills) > 0 {
		sb.WriteString("\n\n# Skills\n\nThese skills are available. When a task matches a skill's description, " +
			"call the skill tool with its name to read its instructions before you start, and follow them.\n")
		for _, s := range p.skills {
			fmt.Fprintf(&sb, "\n- %s: %s", s.Name, strings.Join(strings.Fields(s.Description), " "))
		}
	}
	return sb.String()
}
