package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// modelLog records what the fake model was asked, for the assertions.
type modelLog struct {
	mu      sync.Mutex
	prompts []fakellm.Prompt
}

func (l *modelLog) add(p fakellm.Prompt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prompts = append(l.prompts, p)
}

// find returns the prompts pred matches.
func (l *modelLog) find(pred func(fakellm.Prompt) bool) []fakellm.Prompt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []fakellm.Prompt
	for _, p := range l.prompts {
		if pred(p) {
			out = append(out, p)
		}
	}
	return out
}

// startModel starts a daemon whose reference runtimes call a fake
// OpenAI-compatible service; answer scripts it and every prompt is logged.
func startModel(t *testing.T, answer func(fakellm.Prompt) fakellm.Turn) (*harness, *modelLog) {
	t.Helper()
	log := &modelLog{}
	f := fakellm.Start(t, fakellm.Script(func(p fakellm.Prompt) fakellm.Turn {
		log.add(p)
		return answer(p)
	}))
	h := start(t, func(cfg *config.Config) {
		cfg.Provider.Name = "openai"
		cfg.Provider.BaseURL = f.URL + "/v1"
		cfg.Provider.Model = "test-model"
	})
	return h, log
}

// toolResults are the tool_result events of evs.
func toolResults(evs []client.Event) []*protocol.ToolResult {
	var out []*protocol.ToolResult
	for _, e := range evs {
		if r, ok := e.Msg.(*protocol.ToolResult); ok {
			out = append(out, r)
		}
	}
	return out
}

// createErr sends agent.create and returns its error.
func createErr(c *client.Conn, t *testing.T, mutate func(*protocol.AgentCreate)) *protocol.Error {
	t.Helper()
	cmd := &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)}
	mutate(cmd)
	err := c.Call(ctx(t), cmd, nil)
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("agent.create: %v, want a protocol error", err)
	}
	return pe
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAgentToolsLimitWhatTheModelHas: an agent created with tools [read, ls]
// is offered exactly those; the model's call of write is refused with a
// tool error, no permission is asked and no file is written. A create
// naming a tool the runtime does not have is INVALID_REQUEST listing the
// known ones.
func TestAgentToolsLimitWhatTheModelHas(t *testing.T) {
	h, log := startModel(t, func(p fakellm.Prompt) fakellm.Turn {
		if p.ToolOutput || p.LastUser != "write x.txt" {
			return fakellm.Turn{Text: "could not write"}
		}
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "write", Args: `{"path":"x.txt","content":"hi"}`}}}
	})
	c := h.dial()
	cwd := shortTemp(t)
	id := h.create(c, func(m *protocol.AgentCreate) { m.Cwd, m.Tools = cwd, []string{"read", "ls"} })
	attach(t, c, id, "")
	evs := runTurn(t, c, id, "write x.txt")

	for _, e := range evs {
		if e.Msg.Head().Type == protocol.TypePermissionRequest {
			t.Fatalf("a refused tool asked for permission: %s", e.Raw)
		}
	}
	res := toolResults(evs)
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content.Message, `"write" is not available`) ||
		!strings.Contains(res[0].Content.Message, "read, ls") {
		t.Fatalf("tool results %+v", res)
	}
	if _, err := os.Stat(filepath.Join(cwd, "x.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused write ran: %v", err)
	}
	first := log.find(func(p fakellm.Prompt) bool { return !p.ToolOutput })
	if len(first) != 1 || !slices.Equal(first[0].Tools, []string{"read", "ls"}) {
		t.Fatalf("the model was offered %v, want [read ls]", first)
	}

	// Without tools the agent has every tool, recall included.
	all := h.create(c, nil)
	attach(t, c, all, "")
	runTurn(t, c, all, "write y.txt")
	offered := log.find(func(p fakellm.Prompt) bool { return !p.ToolOutput && p.LastUser == "write y.txt" })
	if len(offered) != 1 || !slices.Contains(offered[0].Tools, "write") || !slices.Contains(offered[0].Tools, "recall") {
		t.Fatalf("default tools %v", offered)
	}

	pe := createErr(c, t, func(m *protocol.AgentCreate) { m.Tools = []string{"read", "teleport"} })
	if pe.Code != protocol.CodeInvalidRequest || !strings.Contains(pe.Message, `"teleport"`) || !strings.Contains(pe.Message, "read, ls, grep") {
		t.Fatalf("unknown tool: %v", pe)
	}
}

// TestAgentSkillsAndProjectInstructions: AGENTS.md (not CLAUDE.md, which
// it shadows) and the named skills' descriptions reach the model's system
// prompt; the skill tool, which the skills bring even under a tools limit,
// returns a skill's body; a project skill and one of $SHARD_HOME/skills
// both load. CLAUDE.md is read where there is no AGENTS.md. A skill that
// does not exist is NOT_FOUND at create.
func TestAgentSkillsAndProjectInstructions(t *testing.T) {
	h, log := startModel(t, func(p fakellm.Prompt) fakellm.Turn {
		if p.ToolOutput || !strings.Contains(p.LastUser, "deploy") {
			return fakellm.Turn{Text: "done"}
		}
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "skill", Args: `{"name":"deploy"}`}}}
	})
	c := h.dial()
	cwd := shortTemp(t)
	writeFile(t, filepath.Join(cwd, "AGENTS.md"), "AGENTS-RULE: run go vet before committing.")
	writeFile(t, filepath.Join(cwd, "CLAUDE.md"), "CLAUDE-RULE: shadowed.")
	writeFile(t, filepath.Join(cwd, ".shard/skills/deploy/SKILL.md"),
		"---\nname: deploy\ndescription: Ship the service to staging.\n---\nDEPLOY-BODY: run make ship.\n")
	writeFile(t, filepath.Join(h.cfg.Home, "skills/review/SKILL.md"),
		"---\nname: review\ndescription: Review a diff for bugs.\n---\nREVIEW-BODY\n")

	id := h.create(c, func(m *protocol.AgentCreate) {
		m.Cwd, m.Tools, m.Skills = cwd, []string{"read"}, []string{"deploy", "review"}
	})
	attach(t, c, id, "")
	evs := runTurn(t, c, id, "deploy it")
	res := toolResults(evs)
	if len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Content.Text, "DEPLOY-BODY: run make ship.") {
		t.Fatalf("skill tool results %+v", res)
	}
	first := log.find(func(p fakellm.Prompt) bool { return p.LastUser == "deploy it" && !p.ToolOutput })
	if len(first) != 1 {
		t.Fatalf("prompts %+v", first)
	}
	sys := first[0].System
	for _, want := range []string{"AGENTS-RULE: run go vet", "- deploy: Ship the service to staging.", "- review: Review a diff for bugs."} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	if strings.Contains(sys, "CLAUDE-RULE") || strings.Contains(sys, "DEPLOY-BODY") {
		t.Errorf("system prompt has CLAUDE.md or a skill body:\n%s", sys)
	}
	if !slices.Equal(first[0].Tools, []string{"read", "skill"}) {
		t.Errorf("tools %v, want [read skill]", first[0].Tools)
	}

	claude := shortTemp(t)
	writeFile(t, filepath.Join(claude, "CLAUDE.md"), "CLAUDE-ONLY-RULE")
	other := h.create(c, func(m *protocol.AgentCreate) { m.Cwd = claude })
	attach(t, c, other, "")
	runTurn(t, c, other, "hello there")
	got := log.find(func(p fakellm.Prompt) bool { return p.LastUser == "hello there" })
	if len(got) != 1 || !strings.Contains(got[0].System, "CLAUDE-ONLY-RULE") || slices.Contains(got[0].Tools, "skill") {
		t.Fatalf("CLAUDE.md agent: %+v", got)
	}

	pe := createErr(c, t, func(m *protocol.AgentCreate) { m.Skills = []string{"deploy"} }) // not in that cwd
	if pe.Code != protocol.CodeNotFound || !strings.Contains(pe.Message, "deploy") {
		t.Fatalf("missing skill: %v", pe)
	}
	pe = createErr(c, t, func(m *protocol.AgentCreate) { m.Skills = []string{"../etc"} })
	if pe.Code != protocol.CodeInvalidRequest {
		t.Fatalf("skill name that is a path: %v", pe)
	}
}

// TestDelegatedChildSystemPrompt: a subagent child's model gets the
// delegated system prompt of its manifest (who delegated the work, that
// its last message is the report), and the parent's tools limit.
func TestDelegatedChildSystemPrompt(t *testing.T) {
	const task = "CHILD-TASK: count the files"
	h, log := startModel(t, func(p fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "ok"}
	})
	c := h.dial()
	parent := h.create(c, func(m *protocol.AgentCreate) { m.Tools = []string{"read", "ls", "subagent"} })
	attach(t, c, parent, "")
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "counter", Task: task})
	waitRuns(t, c, parent, []string{job.Runs[0].RunID}, "all", nil)

	got := log.find(func(p fakellm.Prompt) bool { return p.LastUser == task })
	if len(got) != 1 {
		t.Fatalf("child prompts %+v", got)
	}
	sys := got[0].System
	for _, want := range []string{`You are a subagent named "counter"`, job.Runs[0].Alias, parent, "final message"} {
		if !strings.Contains(sys, want) {
			t.Errorf("child system prompt lacks %q:\n%s", want, sys)
		}
	}
	if strings.Contains(sys, "CHILD-TASK") {
		t.Errorf("the task text is in the system prompt:\n%s", sys)
	}
	if !slices.Equal(got[0].Tools, []string{"read", "ls", "subagent"}) {
		t.Errorf("child tools %v, want the parent's", got[0].Tools)
	}

	// subagent.create tools narrow the children's; a tool the parent lacks
	// is refused, and so is a skill it lacks.
	const narrow = "NARROW-TASK"
	job = createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "reader", Task: narrow, Tools: []string{"read"}})
	waitRuns(t, c, parent, []string{job.Runs[0].RunID}, "all", nil)
	if got := log.find(func(p fakellm.Prompt) bool { return p.LastUser == narrow }); len(got) != 1 || !slices.Equal(got[0].Tools, []string{"read"}) {
		t.Errorf("narrowed child: %+v", got)
	}
	for _, tc := range []struct {
		m    protocol.SubagentCreate
		code protocol.ErrorCode
	}{
		{protocol.SubagentCreate{Tools: []string{"read", "write"}}, protocol.CodePermissionDenied},
		{protocol.SubagentCreate{Skills: []string{"deploy"}}, protocol.CodeInvalidRequest},
	} {
		m := tc.m
		m.Header, m.ParentAgentID, m.Name, m.Task = hdr(protocol.TypeSubagentCreate), parent, "x", "never runs"
		var pe *protocol.Error
		if err := c.Call(ctx(t), &m, nil); !errors.As(err, &pe) || pe.Code != tc.code {
			t.Errorf("subagent.create tools %v skills %v: %v, want %s", m.Tools, m.Skills, err, tc.code)
		}
	}
}

// TestRecallReadsBackACompactedRange: after a compaction summarized the
// first exchange away, the model's recall call with the compaction's index
// returns the original messages of its message_range, read from the
// session on disk.
func TestRecallReadsBackACompactedRange(t *testing.T) {
	h, _ := startModel(t, func(p fakellm.Prompt) fakellm.Turn {
		switch {
		case strings.HasPrefix(p.LastUser, "Summarize the conversation"):
			return fakellm.Turn{Text: "SUMMARY: two prompts."}
		case p.LastUser == "what did I say first?" && !p.ToolOutput:
			return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "recall", Args: `{"index":1}`}}}
		case p.LastUser == "FIRST-PROMPT alpha":
			return fakellm.Turn{Text: "FIRST-ANSWER with details the summary drops"}
		}
		return fakellm.Turn{Text: "noted"}
	})
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	runTurn(t, c, id, "FIRST-PROMPT alpha")
	runTurn(t, c, id, "SECOND-PROMPT beta")

	keep := int64(1)
	var cd struct {
		Compacted    bool      `json:"compacted"`
		Index        int       `json:"index"`
		MessageRange [2]string `json:"message_range"`
	}
	if err := c.Call(ctx(t), &protocol.SessionOp{Header: protocol.Header{Type: protocol.TypeSessionOp, AgentID: id},
		Op: protocol.SessionOpCompact, Args: &protocol.SessionOpArgs{KeepRecentTokens: &keep}}, &cd); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if !cd.Compacted || cd.Index != 1 {
		t.Fatalf("compact answered %+v", cd)
	}

	evs := runTurn(t, c, id, "what did I say first?")
	res := toolResults(evs)
	if len(res) != 1 || res[0].IsError {
		t.Fatalf("recall results %+v", res)
	}
	text := res[0].Content.Text
	for _, want := range []string{"[compaction 1]", cd.MessageRange[0], cd.MessageRange[1], "FIRST-PROMPT alpha",
		"FIRST-ANSWER with details the summary drops", "SECOND-PROMPT beta"} {
		if !strings.Contains(text, want) {
			t.Errorf("recall lacks %q:\n%s", want, text)
		}
	}
}
