package refagent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
	"github.com/shard-dev/shard/runtime/skills"
	"github.com/shard-dev/shard/runtime/tools"
)

// toolSkill is the name of the skill tool, which returns the instructions
// (the body of SKILL.md) of one of the agent's skills. The system prompt
// lists the skills by name and description only (sysprompt.go), so a skill
// costs context only once the model decides it needs it.
const toolSkill = "skill"

// skillTool is the skill tool over the agent's skills. It is read-only:
// it reads a file the agent's own manifest named.
func skillTool(list []skills.Skill) tool {
	byName := make(map[string]skills.Skill, len(list))
	names := make([]string, 0, len(list))
	for _, s := range list {
		byName[s.Name] = s
		names = append(names, s.Name)
	}
	schema := protocol.MustMarshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name": map[string]any{"type": "string", "enum": names, "description": "The skill's name, as listed in the system prompt."},
		},
		"required":             []string{"name"},
		"additionalProperties": false,
	})
	check := func(args map[string]any) error {
		name, _ := args["name"].(string)
		if _, ok := byName[name]; !ok {
			return fmt.Errorf("no skill %q; the skills are: %s", name, strings.Join(names, ", "))
		}
		return nil
	}
	return tool{
		name:     toolSkill,
		readOnly: true,
		spec: provider.ToolSpec{Name: toolSkill, Schema: json.RawMessage(schema),
			Description: "Read the instructions of one of your skills (listed in the system prompt) before doing a task it covers."},
		check: check,
		ask: func(args map[string]any) (string, []protocol.PermissionDetail) {
			name, _ := args["name"].(string)
			return "Read the skill " + name, nil
		},
		run: func(_ context.Context, args map[string]any) toolOutput {
			if err := check(args); err != nil {
				return errorOutput("%v", err)
			}
			s := byName[args["name"].(string)]
			// Read again, so an edit made since the start shows; the copy
			// read at start stands in when the file is gone.
			if fresh, err := skills.Load(s.Path); err == nil {
				s = fresh
			}
			text := fmt.Sprintf("# Skill: %s\n(Its folder is %s; paths the instructions mention are relative to it.)\n\n%s",
				s.Name, filepath.Dir(s.Path), s.Body)
			return toolOutput{content: protocol.ToolResultContent{Kind: tools.ContentText, Text: text}}
		},
	}
}
