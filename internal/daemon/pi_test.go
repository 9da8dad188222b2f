package daemon_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// The pi tests run the real pi (npm @mariozechner/pi-coding-agent, from
// scripts/install-agents.sh) in RPC mode on a pi profile, against a fake
// OpenAI chat completions server; they skip when pi is not installed.

func startPi(t *testing.T) (*harness, *codexScript) {
	t.Helper()
	h, script, _ := startPiWith(t, `["text"]`)
	return h, script
}

// startPiWith is startPi with the fake model's pi input kinds (a JSON
// list), and also returns the fake model server.
func startPiWith(t *testing.T, input string) (*harness, *codexScript, *fakellm.Server) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "agents", "node_modules", ".bin", "pi")
	if _, err := os.Stat(bin); err != nil {
		testhost.Missing(t, "pi", err.Error())
	}
	script := &codexScript{hold: make(chan struct{})}
	fake := fakellm.Start(t, fakellm.Script(func(p fakellm.Prompt) fakellm.Turn {
		bash := func(command string) fakellm.Turn {
			return fakellm.Turn{Calls: []fakellm.ToolCall{{Name: "bash", Args: `{"command":"` + command + `"}`}}, Usage: fakellm.Usage{Input: 42, Output: 7}}
		}
		switch {
		case p.ToolOutput: // the script's "done."
		case strings.Contains(p.LastUser, "tool"):
			return bash("echo tool-ok")
		case strings.Contains(p.LastUser, "make the file"):
			return bash("touch made.txt")
		}
		return script.answer(p)
	}))
	t.Cleanup(script.release) // before the fake closes
	dir := shortTemp(t)
	models := `{"providers":{"fakellm":{"baseUrl":"` + fake.URL + `/v1","api":"openai-completions","apiKey":"not-a-real-key",
"compat":{"supportsDeveloperRole":false,"supportsReasoningEffort":false},
"models":[{"id":"fake-model","name":"Fake Model","reasoning":false,"input":` + input + `,"contextWindow":32000,"maxTokens":4096,
"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0}}]}}}`
	if err := os.WriteFile(filepath.Join(dir, "models.json"), []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(cfg *config.Config) {
		// Node agents need seconds of CPU to start. A subagent runtime runs
		// under SCHED_IDLE, which gives it almost nothing while other work
		// keeps the cores busy, so these tests of the adapter run their
		// subagents at the daemon's own priority; nice_test.go covers the
		// scheduling.
		cfg.Jobs.Nice = 0
		cfg.Jobs.SchedIdle = false
		cfg.Runtimes["pi"] = config.RuntimeProfile{Kind: config.KindPi,
			Command: []string{bin, "--mode", "rpc", "--no-session", "--offline", "--provider", "fakellm", "--model", "fake-model",
				"--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files"},
			Env: map[string]string{"PI_CODING_AGENT_DIR": dir, "PI_OFFLINE": "1", "HOME": dir}}
	})
	return h, script, fake
}

// TestPiProfileStreamsToolAndAbort: a pi agent answers through the daemon
// (deltas, turn_end end_turn with usage), runs a tool once allowed
// (tool_call, tool_result), and an abort mid-stream ends the turn
// cancelled.
func TestPiProfileStreamsToolAndAbort(t *testing.T) {
	h, _ := startPi(t)
	c := h.dial()
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "pi" })
	attach(t, c, id, "")
	prompt(t, c, id, "hi")
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	if got := deltaText(evs); got != "Hello from the fake model." {
		t.Fatalf("streamed text = %q", got)
	}
	end := evs[len(evs)-1]
	if r := rawField(end, "stop_reason"); r != "end_turn" || end.Msg.(*protocol.TurnEnd).Usage == nil {
		t.Fatalf("turn_end = %s", end.Raw)
	}

	prompt(t, c, id, "use a tool")
	answerPi(t, c, id, protocol.DecisionAllow)
	evs = collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	var result *protocol.ToolResult
	for _, e := range evs {
		if r, ok := e.Msg.(*protocol.ToolResult); ok {
			result = r
		}
	}
	if result == nil || !strings.Contains(result.Content.Text, "tool-ok") || !strings.Contains(deltaText(evs), "done.") {
		t.Fatalf("tool turn: result %+v, text %q", result, deltaText(evs))
	}

	prompt(t, c, id, "slow please")
	waitFor(t, c, isType(protocol.TypeMessageDelta, id))
	if _, err := c.Request(ctx(t), &protocol.Abort{Header: protocol.Header{Type: protocol.TypeAbort, AgentID: id}}); err != nil {
		t.Fatal(err)
	}
	if r := rawField(waitFor(t, c, isType(protocol.TypeTurnEnd, id)), "stop_reason"); r != "cancelled" {
		t.Fatalf("aborted turn stop_reason = %q", r)
	}
}

// answerPi waits for the pi gate's permission_request on c (a bash call
// with allow and deny choices) and answers it with the choice of intent.
func answerPi(t *testing.T, c *client.Conn, id, intent string) *protocol.PermissionRequest {
	t.Helper()
	req := waitFor(t, c, isType(protocol.TypePermissionRequest, id)).Msg.(*protocol.PermissionRequest)
	var choice string
	for _, ch := range req.Choices {
		if ch.Intent == intent {
			choice = ch.ID
		}
	}
	if req.ToolName != "bash" || len(req.Choices) != 2 || choice == "" {
		t.Fatalf("permission_request = %+v", req)
	}
	if _, err := c.Request(ctx(t), &protocol.PermissionResponse{Header: protocol.Header{Type: protocol.TypePermissionResponse, AgentID: id},
		RequestID: req.RequestID, ChoiceID: choice}); err != nil {
		t.Fatal(err)
	}
	res := waitFor(t, c, isType(protocol.TypePermissionResolved, id)).Msg.(*protocol.PermissionResolved)
	if res.RequestID != req.RequestID || res.ChoiceID != choice {
		t.Fatalf("permission_resolved = %+v", res)
	}
	return req
}

// TestPiPermissionDenyThenAllow: pi runs its tools through the adapter's
// gate extension, so its bash call is a permission_request to the
// attached client before it runs. Denied, the command does not run (the
// file is not created, the tool result is an error); allowed, it runs.
func TestPiPermissionDenyThenAllow(t *testing.T) {
	h, _ := startPi(t)
	c := h.dial()
	cwd := shortTemp(t)
	id := h.create(c, func(m *protocol.AgentCreate) { m.Runtime = "pi"; m.Cwd = cwd })
	attach(t, c, id, "")
	made := filepath.Join(cwd, "made.txt")

	prompt(t, c, id, "make the file")
	req := answerPi(t, c, id, protocol.DecisionDeny)
	if in, _ := req.Input.(map[string]any); in["command"] != "touch made.txt" {
		t.Fatalf("permission_request input = %v", req.Input)
	}
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	var result *protocol.ToolResult
	var call *protocol.ToolCall
	for _, e := range evs {
		switch m := e.Msg.(type) {
		case *protocol.ToolResult:
			result = m
		case *protocol.ToolCall:
			call = m
		}
	}
	if result == nil || !result.IsError || call == nil || call.Args["command"] != "touch made.txt" {
		t.Fatalf("denied call: tool_call %+v, tool_result %+v", call, result)
	}
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: stat made.txt: %v", err)
	}

	prompt(t, c, id, "make the file")
	answerPi(t, c, id, protocol.DecisionAllow)
	collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	if _, err := os.Stat(made); err != nil {
		t.Fatalf("the allowed command did not run: %v", err)
	}
}

// TestPiChildPermissionDelegatesAndHeadlessDenies: a job child on the pi
// profile with no client of its own sends its gate's request up to the
// parent's client, whose allow lets the command run; with nobody attached
// anywhere the headless policy denies it and the command does not run.
func TestPiChildPermissionDelegatesAndHeadlessDenies(t *testing.T) {
	h, _ := startPi(t)
	c := h.dial()
	parent := h.create(c, nil)
	attach(t, c, parent, "")
	cwd := agentCwd(t, c, parent)
	job := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: parent, Name: "maker", Task: "make the file", Runtime: "pi"})
	child := job.Runs[0].AgentID
	req := waitFor(t, c, isType(protocol.TypePermissionRequest, child)).Msg.(*protocol.PermissionRequest)
	if req.ToolName != "bash" || len(req.Choices) != 2 {
		t.Fatalf("delegated request = %+v", req)
	}
	if _, err := c.Request(ctx(t), permResponse(child, req.RequestID, protocol.DecisionAllow, "")); err != nil {
		t.Fatalf("ancestor client's answer: %v", err)
	}
	if wr := waitRuns(t, c, parent, []string{job.JobID}, "", nil); wr.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("run = %+v", wr.Runs[0])
	}
	if _, err := os.Stat(filepath.Join(cwd, "made.txt")); err != nil {
		t.Fatalf("the allowed command did not run: %v", err)
	}

	lonely := h.create(c, nil) // never attached
	lonelyCwd := agentCwd(t, c, lonely)
	job2 := createJob(t, c, &protocol.SubagentCreate{ParentAgentID: lonely, Name: "maker", Task: "make the file", Runtime: "pi"})
	if res := waitRuns(t, c, lonely, []string{job2.JobID}, "", nil); res.Runs[0].State != protocol.RunCompleted {
		t.Fatalf("headless run = %+v", res.Runs[0])
	}
	if _, err := os.Stat(filepath.Join(lonelyCwd, "made.txt")); !os.IsNotExist(err) {
		t.Fatalf("the headless-denied command ran: %v", err)
	}
}
