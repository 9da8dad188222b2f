package e2e

import (
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/shardtest"
)

// TestShardctlAnswersChoicesReasonsAndAsks drives the real shardd, its
// runtime on an OpenAI-compatible fake model, and shardctl prompt as a
// person would: the bash request's backend-built "Always allow `go test
// …`" choice is picked by its number (sent as choice_id), after which
// `go test ./a` runs without asking; `rm` is refused with a reason the
// model is told; a multi-select and a confirm are answered from stdin and
// the model gets the list and the boolean.
func TestShardctlAnswersChoicesReasonsAndAsks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]fakellm.ToolCall{
		"b":       {Name: "bash", Args: `{"command":"go test ./b"}`},
		"a":       {Name: "bash", Args: `{"command":"go test ./a"}`},
		"rm":      {Name: "bash", Args: `{"command":"rm -f nothing"}`},
		"multi":   {Name: "ask", Args: `{"kind":"select","title":"Which?","options":["x","y","z"],"multiple":true}`},
		"confirm": {Name: "ask", Args: `{"kind":"confirm","title":"Ship it?"}`},
	}
	f := fakellm.Start(t, fakellm.Script(func(p fakellm.Prompt) fakellm.Turn {
		if p.ToolOutput {
			return fakellm.Turn{Text: "noted"}
		}
		mu.Lock()
		defer mu.Unlock()
		return fakellm.Turn{Calls: []fakellm.ToolCall{calls[p.LastUser]}}
	}))
	home := newHome(t)
	p := &proc{stdout: &shardtest.Buffer{}, stderr: &shardtest.Buffer{}}
	sd, err := shardtest.StartDaemon(shardtest.DaemonOptions{
		Shardd: sharddBin, Home: home, Args: []string{"--web-port", "0", "--store.no-sync"},
		Env: []string{"SHARD_PROVIDER_NAME=openai", "SHARD_PROVIDER_BASE_URL=" + f.URL + "/v1",
			"SHARD_PROVIDER_MODEL=test-model", "SHARD_PROVIDER_API_KEY_ENV=E2E_LLM_KEY", "E2E_LLM_KEY=sk-e2e"},
		Stdout: p.stdout, Stderr: p.stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Proc, p.cmd = sd.Proc, sd.Cmd
	d := &daemon{t: t, home: home, proc: p}
	t.Cleanup(d.cleanup)
	d.waitReady()
	id, _ := d.createAgent()
	lastTool := func() string {
		t.Helper()
		req := f.Request(t, f.Count())
		msgs, _ := req.Body["messages"].([]any)
		for i := len(msgs) - 1; i >= 0; i-- {
			if m, _ := msgs[i].(map[string]any); m["role"] == "tool" {
				s, _ := m["content"].(string)
				return s
			}
		}
		t.Fatalf("no tool output in %s", req.Raw)
		return ""
	}

	r := d.mustCtl("3\n", "prompt", id, "b")
	if !strings.Contains(r.stderr, "3) Always allow `go test …` for this agent") {
		t.Fatalf("the signature choice was not offered:\n%s", r.stderr)
	}
	// Asked again, end of input would deny: it is not asked.
	r = d.mustCtl("", "prompt", id, "a")
	if strings.Contains(r.stderr, "Allow bash") || strings.Contains(lastTool(), "permission denied") {
		t.Fatalf("go test ./a asked again:\n%s", r.stderr)
	}
	d.mustCtl("n never delete files here\n", "prompt", id, "rm")
	if out := lastTool(); !strings.Contains(out, "permission denied; the person's reason: never delete files here") {
		t.Fatalf("the model was told %s", out)
	}
	r = d.mustCtl("1,3\n", "prompt", id, "multi")
	if out := lastTool(); !strings.Contains(out, `"answer":["x","z"]`) {
		t.Fatalf("multi-select: the model was told %s\nstderr:\n%s", out, r.stderr)
	}
	d.mustCtl("y\n", "prompt", id, "confirm")
	if out := lastTool(); !strings.Contains(out, `"answer":true`) {
		t.Fatalf("confirm: the model was told %s", out)
	}
}
