package daemon_test

import (
	"os"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// The tests below run one daemon on several providers at once (docs/
// protocol.md §13, providers): the sim, an OpenAI-compatible server and
// Anthropic, the latter two as loopback fakes speaking their real wire
// formats (internal/fakellm), each with a key of its own in the
// environment.

// Keys of the fakes, in the daemon's environment only.
const (
	localKey  = "sk-local-provider-test-key"
	claudeKey = "sk-claude-provider-test-key"
)

// twoFakes starts an OpenAI-compatible fake and an Anthropic fake, each
// answering with its own name, and a daemon configured with both (as
// "local" and "claude") beside the default sim.
func twoFakes(t *testing.T) (h *harness, local, claude *fakellm.Server) {
	t.Helper()
	local = fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "from local", Usage: fakellm.Usage{Input: 10, Output: 2}}
	}))
	claude = fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "from claude", Usage: fakellm.Usage{Input: 20, Output: 3}}
	}))
	cfg := newConfig(t)
	cfg.Providers = map[string]config.ProviderEntry{
		"local":  {Kind: config.ProviderOpenAI, BaseURL: local.URL + "/v1", APIKeyEnv: "LOCAL_TEST_KEY", Models: []string{"qwen3", "llama"}},
		"claude": {Kind: config.ProviderAnthropic, BaseURL: claude.URL, APIKeyEnv: "CLAUDE_TEST_KEY", Models: []string{"claude-x"}},
	}
	h = startOpts(t, cfg, func(o *daemon.Options) {
		o.Environ = append(os.Environ(), "LOCAL_TEST_KEY="+localKey, "CLAUDE_TEST_KEY="+claudeKey)
	})
	return h, local, claude
}

// agentInfo is agent id's AgentInfo as agent.status reports it.
func agentInfo(t *testing.T, c *client.Conn, id string) protocol.AgentInfo {
	t.Helper()
	var data protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}, &data); err != nil {
		t.Fatalf("agent.status: %v", err)
	}
	return data.Agents[0]
}

// wantRuns fails unless id's AgentInfo names provider and model.
func wantRuns(t *testing.T, c *client.Conn, id, provider, model, when string) {
	t.Helper()
	if info := agentInfo(t, c, id); info.Provider != provider || info.Model != model {
		t.Fatalf("%s: AgentInfo says %s/%s, want %s/%s", when, info.Provider, info.Model, provider, model)
	}
}

// turn prompts id (attached on c) and returns the text of its answer.
func turn(t *testing.T, c *client.Conn, id, text string) string {
	t.Helper()
	var answer strings.Builder
	for _, m := range turnMessages(t, c, id, text) {
		for _, b := range m.Content {
			answer.WriteString(b.Text)
		}
	}
	return answer.String()
}

// lastRequest is the body of f's last request, checking its key.
func lastRequest(t *testing.T, f *fakellm.Server, key string) fakellm.Request {
	t.Helper()
	r := f.Request(t, f.Count())
	if got := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key"); got != "Bearer "+key && got != key {
		t.Fatalf("request to %s carried the key %q, want its own", r.Path, got)
	}
	return r
}

func modelOf(r fakellm.Request) any { return r.Body["model"] }

// TestProvidersCreatePromptSwitch creates agents on each provider, checks
// that each turn reaches the right service with the right model and key,
// switches one across providers mid-session, refuses what is not
// configured before anything is stored, and keeps AgentInfo on what runs
// across a daemon restart.
func TestProvidersCreatePromptSwitch(t *testing.T) {
	h, local, claude := twoFakes(t)
	c := h.dial()

	var cat protocol.ModelsListData
	if err := c.Call(ctx(t), &protocol.ModelsList{Header: protocol.Header{Type: protocol.TypeModelsList}}, &cat); err != nil {
		t.Fatalf("models.list: %v", err)
	}
	var ids []string
	for _, d := range cat.Models {
		ids = append(ids, d.ID+"@"+d.Provider+":"+d.Model)
	}
	want := []string{"sim/sim@sim:sim", "sim/sim-think@sim:sim-think", "claude/claude-x@claude:claude-x",
		"local/qwen3@local:qwen3", "local/llama@local:llama"}
	if len(ids) != len(want) || cat.Default.ID != "sim/sim" {
		t.Fatalf("models.list = %v default %s, want %v default sim/sim", ids, cat.Default.ID, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("models.list = %v, want %v", ids, want)
		}
	}

	// One agent per provider: by provider and model, by id alone, by
	// nothing (the default).
	onLocal := h.create(c, func(m *protocol.AgentCreate) { m.Provider, m.Model = "local", "llama" })
	onClaude := h.create(c, func(m *protocol.AgentCreate) { m.Model = "claude/claude-x" })
	onSim := h.create(c, nil)
	localFirst := h.create(c, func(m *protocol.AgentCreate) { m.Provider = "local" })
	wantRuns(t, c, onLocal, "local", "llama", "created on local/llama")
	wantRuns(t, c, onClaude, "claude", "claude-x", "created on claude/claude-x")
	wantRuns(t, c, onSim, "sim", "sim", "created with neither")
	wantRuns(t, c, localFirst, "local", "qwen3", "created on local alone")

	for _, id := range []string{onLocal, onClaude, onSim} {
		attach(t, c, id, "")
	}
	if got := turn(t, c, onLocal, "hello"); got != "from local" {
		t.Fatalf("local agent answered %q", got)
	}
	if local.Count() != 1 || claude.Count() != 0 {
		t.Fatalf("after the local turn: local got %d requests, claude %d", local.Count(), claude.Count())
	}
	if m := modelOf(lastRequest(t, local, localKey)); m != "llama" {
		t.Fatalf("local request asked for %v, want llama", m)
	}
	if got := turn(t, c, onClaude, "hello"); got != "from claude" {
		t.Fatalf("claude agent answered %q", got)
	}
	if m := modelOf(lastRequest(t, claude, claudeKey)); m != "claude-x" || local.Count() != 1 {
		t.Fatalf("claude request asked for %v (local requests %d)", m, local.Count())
	}
	if got := turn(t, c, onSim, "hello"); got == "from local" || got == "from claude" || local.Count() != 1 || claude.Count() != 1 {
		t.Fatalf("the sim agent's turn reached a fake: %q, local %d, claude %d", got, local.Count(), claude.Count())
	}

	// list_models offers every provider's models; set_model crosses
	// providers, and the next turn goes to the other service.
	var lm struct {
		Models []protocol.ModelDescriptor `json:"models"`
		Active protocol.ModelDescriptor   `json:"active"`
	}
	if err := c.Call(ctx(t), &protocol.ListModels{Header: protocol.Header{Type: protocol.TypeListModels, AgentID: onLocal}}, &lm); err != nil {
		t.Fatalf("list_models: %v", err)
	}
	if len(lm.Models) != len(want) || lm.Active.ID != "local/llama" || lm.Active.Provider != "local" {
		t.Fatalf("list_models = %+v", lm)
	}
	var sm struct {
		Previous, Active protocol.ModelDescriptor
	}
	if err := c.Call(ctx(t), &protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, AgentID: onLocal}, Model: "claude/claude-x"}, &sm); err != nil {
		t.Fatalf("set_model: %v", err)
	}
	if sm.Previous.ID != "local/llama" || sm.Active.ID != "claude/claude-x" {
		t.Fatalf("set_model = %+v", sm)
	}
	waitFor(t, c, isType(protocol.TypeModelChanged, onLocal))
	wantRuns(t, c, onLocal, "claude", "claude-x", "after set_model")
	if got := turn(t, c, onLocal, "again"); got != "from claude" || local.Count() != 1 || claude.Count() != 2 {
		t.Fatalf("after set_model the turn answered %q (local %d, claude %d requests)", got, local.Count(), claude.Count())
	}
	if m := modelOf(lastRequest(t, claude, claudeKey)); m != "claude-x" {
		t.Fatalf("switched request asked for %v", m)
	}
	for _, bad := range []string{"nope/x", "gpt-9", "local/claude-x"} {
		err := c.Call(ctx(t), &protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, AgentID: onLocal}, Model: bad}, nil)
		if protocol.CodeOf(err) != protocol.CodeNotFound {
			t.Fatalf("set_model %q: err = %v, want NOT_FOUND", bad, err)
		}
	}
	wantRuns(t, c, onLocal, "claude", "claude-x", "after refused set_models")

	// What is not configured is NOT_FOUND, and nothing is stored.
	var before protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &before); err != nil {
		t.Fatal(err)
	}
	for _, sel := range [][2]string{{"nope", ""}, {"", "gpt-9"}, {"local", "claude-x"}, {"claude", "local/qwen3"}} {
		err := c.Call(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate},
			Cwd: shortTemp(t), Provider: sel[0], Model: sel[1]}, nil)
		if protocol.CodeOf(err) != protocol.CodeNotFound {
			t.Fatalf("agent.create provider %q model %q: err = %v, want NOT_FOUND", sel[0], sel[1], err)
		}
	}
	var after protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Agents) != len(before.Agents) {
		t.Fatalf("refused creates stored agents: %d before, %d after", len(before.Agents), len(after.Agents))
	}

	// A restart keeps what runs, and runs it.
	h.d.Shutdown(false)
	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	wantRuns(t, c2, onLocal, "claude", "claude-x", "after a restart")
	wantRuns(t, c2, localFirst, "local", "qwen3", "after a restart")
	attach(t, c2, onLocal, "")
	if got := turn(t, c2, onLocal, "after restart"); got != "from claude" || claude.Count() != 3 || local.Count() != 1 {
		t.Fatalf("after the restart the turn answered %q (local %d, claude %d)", got, local.Count(), claude.Count())
	}
}

// TestProvidersSubagentInherits gives a child its parent's provider unless
// the create names one, and refuses an unconfigured one before the job is
// committed.
func TestProvidersSubagentInherits(t *testing.T) {
	h, _, _ := twoFakes(t)
	c := h.dial()
	parent := h.create(c, func(m *protocol.AgentCreate) { m.Provider, m.Model = "claude", "claude-x" })

	child := func(prov, model string) (string, error) {
		var data protocol.SubagentCreateData
		err := c.Call(ctx(t), &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
			ParentAgentID: parent, Name: "kid", Task: "say hi", Provider: prov, Model: model}, &data)
		if err != nil {
			return "", err
		}
		return data.Runs[0].AgentID, nil
	}
	id, err := child("", "")
	if err != nil {
		t.Fatalf("subagent.create: %v", err)
	}
	wantRuns(t, c, id, "claude", "claude-x", "a child naming nothing")
	if id, err = child("local", ""); err != nil {
		t.Fatalf("subagent.create on local: %v", err)
	}
	wantRuns(t, c, id, "local", "qwen3", "a child naming local")
	if id, err = child("", "sim/sim-think"); err != nil {
		t.Fatalf("subagent.create on sim/sim-think: %v", err)
	}
	wantRuns(t, c, id, "sim", "sim-think", "a child naming a model id")
	for _, sel := range [][2]string{{"nope", ""}, {"", "qwen3"}} { // qwen3 is not the parent's provider's
		if _, err := child(sel[0], sel[1]); protocol.CodeOf(err) != protocol.CodeNotFound {
			t.Fatalf("subagent.create provider %q model %q: err = %v, want NOT_FOUND", sel[0], sel[1], err)
		}
	}

	// A child created right after its parent switched runs on the new
	// model. (The window where the store still lags the switch is too short
	// to hit from here; jobs TestChildInheritsWhatTheParentRunsNow pins it.)
	attach(t, c, parent, "")
	if _, err := c.Request(ctx(t), &protocol.SetModel{Header: protocol.Header{Type: protocol.TypeSetModel, AgentID: parent}, Model: "local/llama"}); err != nil {
		t.Fatalf("set_model: %v", err)
	}
	if id, err = child("", ""); err != nil {
		t.Fatalf("subagent.create after set_model: %v", err)
	}
	wantRuns(t, c, id, "local", "llama", "a child created right after its parent switched to local/llama")

	// A lead's model starts workers on another provider with the subagent
	// tool's model (a model id names its provider).
	lead := h.create(c, func(m *protocol.AgentCreate) { m.Provider = "sim" })
	attach(t, c, lead, "")
	prompt(t, c, lead, `sim: tool subagent {"name":"worker","task":"say hi","model":"local/qwen3"}`)
	waitFor(t, c, isType(protocol.TypeTurnEnd, lead))
	var st protocol.SubagentStatusData
	if err := c.Call(ctx(t), &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: lead}, &st); err != nil || len(st.Jobs) != 1 {
		t.Fatalf("the lead's jobs = %+v, %v", st.Jobs, err)
	}
	wantRuns(t, c, st.Jobs[0].Runs[0].AgentID, "local", "qwen3", "a worker the lead's subagent tool started on local/qwen3")
}

// TestProvidersWorkspace launches a workspace's agent on the provider and
// model it names, and refuses an unconfigured one before any worktree is
// made.
func TestProvidersWorkspace(t *testing.T) {
	h, _, _ := twoFakes(t)
	repo := gitRepo(t)
	c := h.dial()
	err := c.Call(ctx(t), &protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate},
		Cwd: repo, Label: "bad", Provider: "nope"}, nil)
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("workspace.create on an unconfigured provider: err = %v, want NOT_FOUND", err)
	}
	if out := runGit(t, repo, "worktree", "list"); len(strings.Split(out, "\n")) != 1 {
		t.Fatalf("a refused workspace.create made a worktree:\n%s", out)
	}
	var data protocol.WorkspaceCreateData
	if err := c.Call(ctx(t), &protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate},
		Cwd: repo, Label: "good", Provider: "local", Model: "llama"}, &data); err != nil {
		t.Fatalf("workspace.create: %v", err)
	}
	wantRuns(t, c, data.AgentID, "local", "llama", "a workspace's agent")
	var att protocol.WorkspaceAttachData
	if err := c.Call(ctx(t), &protocol.WorkspaceAttach{Header: protocol.Header{Type: protocol.TypeWorkspaceAttach},
		WorkspaceID: data.Workspace.WorkspaceID, Model: "claude/claude-x"}, &att); err != nil {
		t.Fatalf("workspace.attach: %v", err)
	}
	wantRuns(t, c, att.AgentID, "claude", "claude-x", "a workspace.attach agent")
	err = c.Call(ctx(t), &protocol.WorkspaceAttach{Header: protocol.Header{Type: protocol.TypeWorkspaceAttach},
		WorkspaceID: data.Workspace.WorkspaceID, Provider: "local", Model: "gpt-9"}, nil)
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("workspace.attach on an unconfigured model: err = %v, want NOT_FOUND", err)
	}
}

// TestProvidersLegacyBlock keeps the single provider: block working: an
// agent created with nothing runs its model on it, and AgentInfo says so.
func TestProvidersLegacyBlock(t *testing.T) {
	f := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "legacy", Usage: fakellm.Usage{Input: 1, Output: 1}}
	}))
	h := start(t, func(cfg *config.Config) {
		cfg.Provider = config.ProviderConfig{Name: "openai", BaseURL: f.URL + "/v1", Model: "m1", APIKeyEnv: "LOCAL_TEST_KEY"}
	})
	c := h.dial()
	id := h.create(c, nil)
	wantRuns(t, c, id, "openai", "m1", "created on the block's provider")
	attach(t, c, id, "")
	if got := turn(t, c, id, "hi"); got != "legacy" {
		t.Fatalf("answered %q", got)
	}
	if m := modelOf(f.Request(t, 1)); m != "m1" {
		t.Fatalf("request asked for %v, want m1", m)
	}
	err := c.Call(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t), Provider: "anthropic"}, nil)
	if protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("a provider the block does not configure: err = %v, want NOT_FOUND", err)
	}
}

// TestProvidersThirdPartyRuntime: an agent on an acp profile runs on its
// own models, so a create naming a provider is NOT_FOUND and one naming a
// model UNSUPPORTED, both before anything is stored; one naming neither
// claims no provider in AgentInfo.
func TestProvidersThirdPartyRuntime(t *testing.T) {
	h := start(t, func(cfg *config.Config) {
		cfg.Runtimes["other"] = config.RuntimeProfile{Kind: config.KindACP, Command: []string{"/nonexistent/agent"}}
	})
	c := h.dial()
	for _, tc := range []struct {
		prov, model string
		code        protocol.ErrorCode
	}{{"sim", "", protocol.CodeNotFound}, {"", "sim/sim", protocol.CodeUnsupported}} {
		err := c.Call(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate},
			Cwd: shortTemp(t), Runtime: "other", Provider: tc.prov, Model: tc.model}, nil)
		if protocol.CodeOf(err) != tc.code {
			t.Fatalf("acp create provider %q model %q: err = %v, want %s", tc.prov, tc.model, err, tc.code)
		}
	}
	// The profile's agent does not exist, so its runtime fails to start;
	// the agent is stored all the same (a retry is safe).
	err := c.Call(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t), Runtime: "other"}, nil)
	if err != nil && protocol.CodeOf(err) != protocol.CodeRuntimeStartFailed {
		t.Fatalf("acp create naming neither: %v", err)
	}
	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil || len(list.Agents) != 1 {
		t.Fatalf("agent.list: %v, %d agents, want the one created", err, len(list.Agents))
	}
	if a := list.Agents[0]; a.Provider != "" || a.Model != "" || a.Runtime != "other" {
		t.Fatalf("the acp agent claims %s/%s on %s", a.Provider, a.Model, a.Runtime)
	}
}
