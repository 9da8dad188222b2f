package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// The tests below run a real third-party agent, codex-acp from npm
// (installed by scripts/install-agents.sh), on an acp runtime profile,
// through the adapter, against a fake OpenAI Responses server on
// 127.0.0.1 (internal/fakellm). They skip when the agent is not installed.

// codexAgent returns the installed codex-acp binary, or skips (fails in
// strict mode: testhost.Missing).
func codexAgent(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", "@zed-industries", "codex-acp-linux-x64", "bin", "codex-acp")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "codex-acp", err.Error())
	}
	return bin
}

// codexScript is the fake model: "write" asks codex to run a command
// that needs approval, then says done; "slow" streams one word and waits
// for hold; anything else is a short answer.
type codexScript struct {
	hold chan struct{}
	once sync.Once
}

func (s *codexScript) release() { s.once.Do(func() { close(s.hold) }) }

func (s *codexScript) answer(p fakellm.Prompt) fakellm.Turn {
	usage := fakellm.Usage{Input: 42, Output: 7}
	switch {
	case p.ToolOutput:
		return fakellm.Turn{Text: "done.", Usage: usage}
	case strings.Contains(p.LastUser, "write"):
		return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "exec_command",
			Args: `{"cmd":"echo tool-ok > out.txt","sandbox_permissions":"require_escalated","justification":"write a file"}`}}, Usage: usage}
	case strings.Contains(p.LastUser, "slow"):
		return fakellm.Turn{Text: "thinking slowly about it", Hold: s.hold, Usage: usage}
	}
	return fakellm.Turn{Text: "Hello from the fake model.", Usage: usage}
}

// startCodex starts a daemon with a "codex" acp profile pointing at a new
// fake model server.
func startCodex(t *testing.T) (*harness, *fakellm.Server, *codexScript) {
	t.Helper()
	bin := codexAgent(t)
	script := &codexScript{hold: make(chan struct{})}
	fake := fakellm.Start(t, fakellm.Script(script.answer))
	t.Cleanup(script.release) // before the fake closes
	h := start(t, func(cfg *config.Config) {
		// Node agents need seconds of CPU to start. A subagent runtime runs
		// under SCHED_IDLE, which gives it almost nothing while other work
		// keeps the cores busy, so these tests of the adapter run their
		// subagents at the daemon's own priority; nice_test.go covers the
		// scheduling.
		cfg.Jobs.Nice = 0
		cfg.Jobs.SchedIdle = false
		cfg.Runtimes["codex"] = codexProfile(t, bin, fake.URL)
	})
	return h, fake, script
}

// codexProfile is an acp runtime profile running codex-acp bin on the
// fake Responses server at url, with a HOME and CODEX_HOME of its own.
func codexProfile(t *testing.T, bin, url string) config.RuntimeProfile {
	t.Helper()
	home := shortTemp(t)
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	toml := "model_provider = \"fake\"\nmodel = \"gpt-5\"\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"" + url +
		"/v1\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n"
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.RuntimeProfile{Kind: config.KindACP, Command: []string{bin},
		Env: map[string]string{"HOME": home, "CODEX_HOME": codexHome, "OPENAI_API_KEY": "not-a-real-key",
			"SHARD_ACP_AUTH_METHOD": "openai-api-key"}}
}

func rawField(e client.Event, name string) string {
	var m map[string]any
	_ = json.Unmarshal(e.Raw, &m)
	s, _ := m[name].(string)
	return s
}

func deltaText(evs []client.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if d, ok := e.Msg.(*protocol.MessageDelta); ok && d.Kind == protocol.DeltaText {
			b.WriteString(d.TextDelta)
		}
	}
	return b.String()
}

// TestACPProfileStreamsAnswer: an agent on the codex profile answers a
// prompt through the daemon (deltas, message_complete, turn_end with the
// agent's stop reason), AgentInfo names the profile, and an unknown
// profile is INVALID_REQUEST naming it.
func TestACPProfileStreamsAnswer(t *testing.T) {
	h, _, _ := startCodex(t)
	c := h.dial()
	var bad protocol.AgentCreateData
	err := c.Call(ctx(t), &protocol.AgentCreate{Header: hdr(protocol.TypeAgentCreate), Cwd: shortTemp(t), Runtime: "nope"}, &bad)
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown runtime: err = %v", err)
	}
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "codex" })
	sync := attach(t, c, id, "")
	if sync.Mode != "read-only" {
		t.Errorf("sync mode = %q, want codex's read-only", sync.Mode)
	}
	prompt(t, c, id, "hi")
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	if got := deltaText(evs); !strings.HasSuffix(got, "Hello from the fake model.") {
		t.Fatalf("streamed text = %q", got)
	}
	if r := rawField(evs[len(evs)-1], "stop_reason"); r != "end_turn" {
		t.Fatalf("turn_end stop_reason = %q", r)
	}
	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: hdr(protocol.TypeAgentList)}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Agents) != 1 || list.Agents[0].Runtime != "codex" {
		t.Fatalf("agents = %+v", list.Agents)
	}
}

// TestACPPermissionFromSecondClient: codex asks approval for a command;
// the request reaches both interactive clients with codex's own options
// as choices, the second client's answer wins, both see it resolved, and
// the command runs.
func TestACPPermissionFromSecondClient(t *testing.T) {
	h, _, _ := startCodex(t)
	a, b := h.dial(), h.dial()
	cwd := shortTemp(t)
	id := h.create(a, func(m *protocol.AgentCreate) { m.Runtime = "codex"; m.Cwd = cwd })
	attach(t, a, id, "")
	attach(t, b, id, "")
	prompt(t, a, id, "please write the file")
	ev := waitFor(t, b, isType(protocol.TypePermissionRequest, id))
	req := ev.Msg.(*protocol.PermissionRequest)
	var allow string
	for _, ch := range req.Choices {
		if ch.Intent == protocol.DecisionAllow {
			allow = ch.ID
		}
	}
	if allow == "" {
		t.Fatalf("no allow choice in %+v", req.Choices)
	}
	waitFor(t, a, isType(protocol.TypePermissionRequest, id))
	if _, err := b.Request(ctx(t), &protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, AgentID: id},
		RequestID: req.RequestID, ChoiceID: allow}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Conn{a, b} {
		res := waitFor(t, c, isType(protocol.TypePermissionResolved, id)).Msg.(*protocol.PermissionResolved)
		if res.RequestID != req.RequestID || res.ChoiceID != allow {
			t.Fatalf("resolved = %+v", res)
		}
	}
	evs := collectUntil(t, a, isType(protocol.TypeTurnEnd, id))
	var sawCall, sawResult bool
	for _, e := range evs {
		switch e.Msg.(type) {
		case *protocol.ToolCall:
			sawCall = true
		case *protocol.ToolResult:
			sawResult = true
		}
	}
	if !sawCall || !sawResult {
		t.Fatalf("tool_call %v tool_result %v", sawCall, sawResult)
	}
	if data, err := os.ReadFile(filepath.Join(cwd, "out.txt")); err != nil || strings.TrimSpace(string(data)) != "tool-ok" {
		t.Fatalf("out.txt = %q, %v", data, err)
	}
}

// TestACPAbortMidStream: abort while codex streams ends the turn with
// stop_reason cancelled and the agent idle.
func TestACPAbortMidStream(t *testing.T) {
	h, _, _ := startCodex(t)
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "codex" })
	attach(t, c, id, "")
	prompt(t, c, id, "slow please")
	waitFor(t, c, isType(protocol.TypeMessageDelta, id))
	if _, err := c.Request(ctx(t), &protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: id}}); err != nil {
		t.Fatal(err)
	}
	end := waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	if r := rawField(end, "stop_reason"); r != "cancelled" {
		t.Fatalf("stop_reason = %q", r)
	}
	waitFor(t, c, func(e client.Event) bool {
		s, ok := e.Msg.(*protocol.Status)
		return ok && s.AgentID == id && s.Status == protocol.StatusIdle
	})
}

// TestACPReconnectMidTurn: a client attaching while codex streams gets a
// sync with the turn in flight (streaming, the prompt in the live window)
// and then the rest of the turn.
func TestACPReconnectMidTurn(t *testing.T) {
	h, _, script := startCodex(t)
	a := h.dial()
	id := h.create(a, func(m *protocol.AgentCreate) { m.Runtime = "codex" })
	attach(t, a, id, "")
	prompt(t, a, id, "slow please")
	waitFor(t, a, isType(protocol.TypeMessageDelta, id))
	b := h.dial()
	s := attach(t, b, id, "")
	if s.Status != protocol.StatusStreaming {
		t.Fatalf("sync status = %s", s.Status)
	}
	if n := len(s.LiveWindow.Messages); n == 0 || s.LiveWindow.Messages[0].Role != "user" || !strings.Contains(s.LiveWindow.Messages[0].Content[0].Text, "slow please") {
		t.Fatalf("sync live window = %+v", s.LiveWindow.Messages)
	}
	script.release()
	evs := collectUntil(t, b, isType(protocol.TypeTurnEnd, id))
	if !strings.Contains(deltaText(evs), "slowly") {
		t.Fatalf("after sync the client saw %q", deltaText(evs))
	}
}

// TestACPAgentCrashMidTurn: the agent process dying mid-turn is the
// runtime's crash: agent_exited with runtime_state failed, and the next
// prompt starts a new generation.
func TestACPAgentCrashMidTurn(t *testing.T) {
	h, _, script := startCodex(t)
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "codex" })
	attach(t, c, id, "")
	prompt(t, c, id, "slow please")
	waitFor(t, c, isType(protocol.TypeMessageDelta, id))
	killed := 0
	for _, pid := range runtimePIDs(t, id) {
		if exe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe")); strings.Contains(exe, "codex") {
			killPID(pid)
			killed++
		}
	}
	if killed == 0 {
		t.Fatal("no codex process carries the agent's SHARD_AGENT_ID")
	}
	ev := waitFor(t, c, isType(protocol.TypeAgentExited, id))
	if ex := ev.Msg.(*protocol.AgentExited); ex.RuntimeState != protocol.RuntimeFailed {
		t.Fatalf("agent_exited = %+v", ex)
	}
	// The adapter follows its agent: nothing of the generation is left.
	eventually(t, "the generation's processes are gone", func() bool { return len(runtimePIDs(t, id)) == 0 })
	script.release()
	prompt(t, c, id, "hi again")
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	if !strings.Contains(deltaText(evs), "Hello from the fake model.") {
		t.Fatalf("after restart: %q", deltaText(evs))
	}
}

// TestACPSubagentJob: a job run on the codex profile completes with the
// agent's answer as its final text.
func TestACPSubagentJob(t *testing.T) {
	h, _, _ := startCodex(t)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "greet", Task: "say hello", Runtime: "codex"})
	res := waitRuns(t, c, parent, []string{job.Runs[0].RunID}, "", nil)
	if res.TimedOut || res.Runs[0].State != protocol.RunCompleted || !strings.Contains(res.Runs[0].FinalText, "Hello from the fake model.") {
		t.Fatalf("wait = %+v", res)
	}
	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: hdr(protocol.TypeAgentList)}, &list); err != nil {
		t.Fatal(err)
	}
	for _, a := range list.Agents {
		if a.AgentID == job.Runs[0].AgentID && a.Runtime != "codex" {
			t.Fatalf("child runtime = %q", a.Runtime)
		}
	}
	var bad protocol.SubagentCreateData
	err := c.Call(ctx(t), &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate), ParentAgentID: parent, Name: "x", Task: "y", Runtime: "nope"}, &bad)
	if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("unknown runtime: %v", err)
	}
}

// TestACPAgentFailures: an agent that cannot start is RUNTIME_START_FAILED
// with the reason in the agent's log; one that writes lines that are not
// ACP before speaking it gets a non-fatal PROTOCOL_ERROR and still works.
func TestACPAgentFailures(t *testing.T) {
	bin := codexAgent(t)
	h, _, _ := startCodex(t)
	prof := h.cfg.Runtimes["codex"]
	// Profiles are read when the daemon starts: a second daemon carries
	// the broken ones.
	h2 := start(t, func(cfg *config.Config) {
		cfg.Runtimes["missing"] = config.RuntimeProfile{Kind: config.KindACP, Command: []string{"/nonexistent/agent-binary"}}
		noisy := prof
		noisy.Command = []string{"/bin/sh", "-c", `echo "this is not json"; exec "$0"`, bin}
		cfg.Runtimes["noisy"] = noisy
	})
	c := h2.dial()
	var created protocol.AgentCreateData
	err := c.Call(ctx(t), &protocol.AgentCreate{Header: hdr(protocol.TypeAgentCreate), Cwd: shortTemp(t), Runtime: "missing"}, &created)
	if protocol.CodeOf(err) != protocol.CodeRuntimeStartFailed {
		t.Fatalf("create an agent that cannot start: %v", err)
	}
	logs, _ := filepath.Glob(filepath.Join(h2.cfg.LogDir(), "agents", "*.log"))
	var logData []byte
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		logData = append(logData, b...)
	}
	if !strings.Contains(string(logData), "/nonexistent/agent-binary") {
		t.Fatalf("agent log does not say why:\n%s", logData)
	}

	// The garbage comes before anyone attached (agent.create starts the
	// runtime), so its PROTOCOL_ERROR event reaches nobody; the adapter
	// logs it (without the line) and the agent works. The event itself is
	// checked by the transcript test (runtime/adapter/acp).
	noisy := h2.create(c, func(m *protocol.AgentCreate) { m.Runtime = "noisy" })
	attach(t, c, noisy, "")
	prompt(t, c, noisy, "hi")
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, noisy))
	if !strings.Contains(deltaText(evs), "Hello from the fake model.") {
		t.Fatalf("noisy agent answered %q", deltaText(evs))
	}
	logData, _ = os.ReadFile(filepath.Join(h2.cfg.LogDir(), "agents", noisy+".log"))
	if !strings.Contains(string(logData), "not its protocol") || strings.Contains(string(logData), "this is not json") {
		t.Fatalf("noisy agent's log:\n%s", logData)
	}
}

// TestACPSessionLoadAfterRestart: after its runtime stops, an agent's next
// generation loads the ACP session (session/load), so the sync of a new
// attachment shows the earlier conversation.
func TestACPSessionLoadAfterRestart(t *testing.T) {
	h, _, _ := startCodex(t)
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "codex" })
	attach(t, c, id, "")
	prompt(t, c, id, "remember this")
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	if err := c.Call(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the generation's processes are gone", func() bool { return len(runtimePIDs(t, id)) == 0 })
	c2 := h.dial()
	s := attach(t, c2, id, "")
	var texts []string
	for _, m := range s.LiveWindow.Messages {
		for _, b := range m.Content {
			texts = append(texts, m.Role+":"+b.Text)
		}
	}
	joined := strings.Join(texts, "|")
	if !strings.Contains(joined, "user:remember this") || !strings.Contains(joined, "Hello from the fake model.") {
		t.Fatalf("sync after restart = %q", joined)
	}
}

// TestACPChildPermissionDelegatesAndHeadlessDenies: a job child on the
// codex profile with no client of its own sends codex's permission request
// up to the parent's interactive client (keeping the child's agent_id),
// whose answer lets the command run; with nobody attached anywhere the
// headless policy denies it and codex runs nothing.
func TestACPChildPermissionDelegatesAndHeadlessDenies(t *testing.T) {
	h, _, _ := startCodex(t)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	cwd := agentCwd(t, c, parent)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "writer", Task: "please write the file", Runtime: "codex"})
	child := job.Runs[0].AgentID
	req := waitFor(t, c, isType(protocol.TypePermissionRequest, child)).Msg.(*protocol.PermissionRequest)
	if len(req.Choices) == 0 {
		t.Fatalf("delegated request without the agent's choices: %+v", req)
	}
	if _, err := c.Request(ctx(t), permResponse(child, req.RequestID, protocol.DecisionAllow, "")); err != nil {
		t.Fatalf("ancestor client's answer: %v", err)
	}
	wr := waitRuns(t, c, parent, []string{job.JobID}, "", nil)
	if wr.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("run = %+v", wr.Runs[0])
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "out.txt")); err != nil || strings.TrimSpace(string(b)) != "tool-ok" {
		t.Fatalf("out.txt = %q, %v", b, err)
	}

	lonely := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "codex" }) // never attached
	lonelyCwd := agentCwd(t, c, lonely)
	job2 := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: lonely, Name: "writer", Task: "please write the file", Runtime: "codex"})
	res := waitRuns(t, c, lonely, []string{job2.JobID}, "", nil)
	if res.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("headless run = %+v", res.Runs[0])
	}
	if _, err := os.Stat(filepath.Join(lonelyCwd, "out.txt")); err == nil {
		t.Fatal("the denied command ran")
	}
}
