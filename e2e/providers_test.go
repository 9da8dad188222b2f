//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/protocol"
)

// TestShardctlProviders drives several providers from shardctl against a
// real shardd whose config file has a providers: mapping beside the sim:
// models lists every model, agents create --provider/--model runs the
// agent there (and refuses what is not configured), and attach's /model
// lists the models and switches across providers.
func TestShardctlProviders(t *testing.T) {
	t.Parallel()
	fake := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "from the local server", Usage: fakellm.Usage{Input: 5, Output: 4}}
	}))
	home := newHome(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "providers:\n  local:\n    kind: openai\n    base_url: " + fake.URL + "/v1\n    models: [qwen3, llama]\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonAt(t, home)

	var cat protocol.ModelsListData
	if err := json.Unmarshal([]byte(d.mustCtl("", "models", "-o", "json").stdout), &cat); err != nil {
		t.Fatal(err)
	}
	if len(cat.Models) != 4 || cat.Default.ID != "sim/sim" || cat.Models[3].ID != "local/llama" || cat.Models[3].Provider != "local" {
		t.Fatalf("models -o json = %+v", cat)
	}
	if table := d.mustCtl("", "models").stdout; !strings.Contains(table, "local/qwen3") || !strings.Contains(table, "*  sim/sim") {
		t.Fatalf("models printed:\n%s", table)
	}

	id := strings.TrimSpace(d.mustCtl("", "agents", "create", "--cwd", shortTemp(t), "--provider", "local", "--model", "llama").stdout)
	var list protocol.AgentListData
	if err := json.Unmarshal([]byte(d.mustCtl("", "agents", "ls", "-o", "json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Agents) != 1 || list.Agents[0].Provider != "local" || list.Agents[0].Model != "llama" {
		t.Fatalf("agents ls after create --provider local --model llama: %+v", list.Agents)
	}
	if r := d.ctl("", "agents", "create", "--cwd", shortTemp(t), "--provider", "nope"); r.code == 0 || !strings.Contains(r.stderr, string(protocol.CodeNotFound)) {
		t.Fatalf("agents create --provider nope: exit %d, stderr %q", r.code, r.stderr)
	}

	d.mustCtl("", "prompt", id, "hello")
	if fake.Count() != 1 || fake.Request(t, 1).Body["model"] != "llama" {
		t.Fatalf("the prompt reached the local server %d times (model %v)", fake.Count(), fake.Request(t, 1).Body["model"])
	}

	// attach: /model lists every provider's models, the active one
	// marked; /model ID switches to the sim, and the next turn stays off
	// the local server.
	out := d.mustCtl("/model\n/model sim/sim-think\nagain\n", "attach", id).stdout
	if !strings.Contains(out, "* local/llama") || !strings.Contains(out, "  sim/sim-think") {
		t.Fatalf("attach /model printed:\n%s", out)
	}
	if !strings.Contains(out, "local/llama → sim/sim-think") {
		t.Fatalf("attach /model sim/sim-think printed:\n%s", out)
	}
	if fake.Count() != 1 {
		t.Fatalf("after switching to the sim the turn reached the local server (%d requests)", fake.Count())
	}
	if err := json.Unmarshal([]byte(d.mustCtl("", "agents", "ls", "-o", "json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	if list.Agents[0].Provider != "sim" || list.Agents[0].Model != "sim-think" {
		t.Fatalf("agents ls after /model sim/sim-think: %s/%s", list.Agents[0].Provider, list.Agents[0].Model)
	}
}
