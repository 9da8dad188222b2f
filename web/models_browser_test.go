//go:build linux

package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/internal/fakellm"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/protocol"
)

// homeWithLocal makes a daemon home whose config adds a second provider,
// "local" (an OpenAI-compatible server: the loopback fake) with the models
// qwen3 and llama, beside the default sim provider.
func homeWithLocal(t *testing.T, fake *fakellm.Server) string {
	t.Helper()
	home := filepath.Join(shardtest.ShortTemp(t, "wb"), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "providers:\n  local:\n    kind: openai\n    base_url: " + fake.URL + "/v1\n    models: [qwen3, llama]\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// pick selects value in the <select> the CSS selector names, as a person
// does: the value, then a change event.
func (p *page) pick(sel, value string) {
	p.t.Helper()
	p.run("pick "+value+" in "+sel, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		ok, err := chromedp.Evaluate[bool](fmt.Sprintf(`(el => !!el && [...el.options].some(o => o.value === %q) && (el.value = %q, el.dispatchEvent(new Event("change", {bubbles: true})), true))(document.querySelector(%q))`, value, value, sel))(ctx, tg)
		if err == nil && !ok {
			err = fmt.Errorf("no option %q in %s", value, sel)
		}
		return err
	}))
}

// optionGroups is a JavaScript expression: the select's option groups as
// "label:value,value …", or its options' values when it has no groups; ""
// while the element is not a select (a form without the catalog yet).
func optionGroups(sel string) string {
	return fmt.Sprintf(`(el => !el || el.tagName !== "SELECT" ? "" : el.querySelector("optgroup")
		? [...el.querySelectorAll("optgroup")].map(g => g.label + ":" + [...g.querySelectorAll("option")].map(o => o.value).join(",")).join(" ")
		: [...el.options].map(o => o.value).join(","))(document.querySelector(%q))`, sel)
}

// lastSent is the last record of type typ the page sent.
func lastSent(t *testing.T, p *page, typ string) map[string]any {
	t.Helper()
	recs := sent(p, typ)
	if len(recs) == 0 {
		t.Fatalf("the page sent no %s", typ)
	}
	return recs[len(recs)-1]
}

// TestDashboardCreateFormsPickModels: the new-agent form, the workspace
// create (the same form, isolation workspace) and the workspace attach form
// offer the daemon's models (models.list) as a picker grouped by provider,
// labelled "provider · model", the default preselected; what is sent as
// model is the descriptor id, and the agent runs there (its AgentInfo, and
// the provider's server answering its turn).
func TestDashboardCreateFormsPickModels(t *testing.T) {
	fake := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "qwen answers", Usage: fakellm.Usage{Input: 3, Output: 2}}
	}))
	b := newBrowser(t)
	d := startDaemon(t, homeWithLocal(t, fake), 0)
	var cat protocol.ModelsListData
	if err := json.Unmarshal([]byte(d.ctl("models", "-o", "json")), &cat); err != nil {
		t.Fatal(err)
	}
	p := b.newPage("owner")
	p.recordSent()
	p.enroll(d)

	const groups = "sim:sim/sim,sim/sim-think local:local/qwen3,local/llama"
	p.until("the create form's model picker", optionGroups("#create-model")+` === `+fmt.Sprintf("%q", groups))
	if got := eval[string](p, `document.querySelector("#create-model").value`); got != cat.Default.ID {
		t.Fatalf("preselected %q; the daemon's default is %q", got, cat.Default.ID)
	}
	if got := eval[string](p, `[...document.querySelectorAll("#create-model option")].map(o => o.textContent).join("|")`); got != "sim · sim (default)|sim · sim-think|local · qwen3|local · llama" {
		t.Fatalf("option labels %q", got)
	}

	// The default, untouched: sent as its id.
	first := p.createAgent(t.TempDir(), "plain")
	if m := lastSent(t, p, "agent.create")["model"]; m != cat.Default.ID {
		t.Fatalf("agent.create model %v, want the default's id %q", m, cat.Default.ID)
	}
	p.until("the default agent listed", fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes(%q)`, first, cat.Default.Provider+"/"+cat.Default.Model))

	// Another provider's model.
	p.pick("#create-model", "local/qwen3")
	second := p.createAgent(t.TempDir(), "qwen")
	if m := lastSent(t, p, "agent.create")["model"]; m != "local/qwen3" {
		t.Fatalf("agent.create model %v, want local/qwen3", m)
	}
	p.until("runs on local/qwen3", fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes("local/qwen3") && document.querySelector("#agent-model")?.textContent === "local · qwen3"`, second))
	p.prompt("hello")
	p.until("the local server answered", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "qwen answers") && document.querySelector("#agent-status")?.textContent === "idle"`)
	if fake.Count() != 1 || fake.Request(t, 1).Body["model"] != "qwen3" {
		t.Fatalf("the local server got %d requests; want one for qwen3", fake.Count())
	}

	// A workspace of a repository, on llama.
	repo := newRepo(t)
	p.pick("#create-isolation", "workspace")
	p.until("workspace fields", `!!document.querySelector("#create-branch")`)
	p.until("directory cleared", `(el => (el.value = "", el.dispatchEvent(new Event("input", {bubbles: true})), true))(document.querySelector("#create-cwd"))`)
	p.pick("#create-model", "local/llama")
	p.run("create workspace", chromedp.SendKeys(chromedp.CSS("#create-cwd"), repo), chromedp.SendKeys(chromedp.CSS("#create-name"), "ws-llama"),
		chromedp.Click(chromedp.CSS("#create-go")))
	p.until("workspace created", `/^workspace: created \S+/.test(document.querySelector("#notice").textContent)`)
	if m := lastSent(t, p, "workspace.create")["model"]; m != "local/llama" {
		t.Fatalf("workspace.create model %v, want local/llama", m)
	}
	p.until("its agent selected", fmt.Sprintf(`(s => !!s && s !== %q && s !== %q)(document.querySelector(".agentview")?.dataset.selected)`, first, second))
	third := eval[string](p, `document.querySelector(".agentview").dataset.selected`)
	p.until("the workspace's agent runs on local/llama", fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes("local/llama")`, third))

	// Attach another agent to the workspace, on sim-think.
	p.until("workspace listed", `!!document.querySelector("#workspaces .ws")`)
	wsID := eval[string](p, `document.querySelector("#workspaces .ws").dataset.workspace`)
	p.clickWhen("open attach", `document.querySelector("#workspaces .ws .ws-attach")`)
	sel := "#ws-model-" + wsID
	p.until("the attach form's model picker", optionGroups(sel)+` === `+fmt.Sprintf("%q", groups)+fmt.Sprintf(` && document.querySelector(%q).value === %q`, sel, cat.Default.ID))
	p.pick(sel, "sim/sim-think")
	p.run("attach", chromedp.Click(chromedp.CSS(`#workspaces .ws .ws-attach-form button[type=submit]`)))
	p.until("attach answered", `/^attach: /.test(document.querySelector("#notice").textContent)`)
	if m := lastSent(t, p, "workspace.attach")["model"]; m != "sim/sim-think" {
		t.Fatalf("workspace.attach model %v, want sim/sim-think", m)
	}
	p.until("the attached agent selected", fmt.Sprintf(`(s => !!s && ![%q, %q, %q].includes(s))(document.querySelector(".agentview")?.dataset.selected)`, first, second, third))
	fourth := eval[string](p, `document.querySelector(".agentview").dataset.selected`)
	p.until("the attached agent runs on sim-think", fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes("sim/sim-think")`, fourth))
	p.screenshot("web-create-model-picker")
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardProviderFollowsModelChanges: the overview and the agent's
// header say what an agent runs after another client switches it across
// providers: the agent this page is attached to follows model_changed at
// once, another agent follows from the overview's quiet agent.list poll
// (which no event reaches), and a reload reads the same from the daemon.
func TestDashboardProviderFollowsModelChanges(t *testing.T) {
	fake := fakellm.Start(t, fakellm.Script(func(fakellm.Prompt) fakellm.Turn {
		return fakellm.Turn{Text: "unused"}
	}))
	b := newBrowser(t)
	d := startDaemon(t, homeWithLocal(t, fake), 0)
	alice, bob := b.newPage("alice"), b.newPage("bob")
	alice.recordSent()
	alice.enroll(d)
	bob.enroll(d)
	one := alice.createAgent(t.TempDir(), "one")
	two := alice.createAgent(t.TempDir(), "two")
	alice.until("header names the default", `document.querySelector("#agent-model")?.textContent === "sim · sim"`)
	row := func(id string) string {
		return fmt.Sprintf(`(document.querySelector('[data-agent=%q] .meta')?.textContent || "")`, id)
	}

	// Bob switches the agent Alice is not attached to.
	bob.run("open one", chromedp.Navigate(d.url()+"/#agent="+one))
	bob.online()
	bob.until("one's picker", fmt.Sprintf(`document.querySelector(".agentview")?.dataset.selected === %q && !!document.querySelector("#model option[value='local/llama']")`, one))
	bob.pick("#model", "local/llama")
	bob.until("switched", `/^model: done/.test(document.querySelector("#notice").textContent)`)
	alice.until("one's row follows the poll across providers", row(one)+`.includes("local/llama")`)
	if h := eval[string](alice, `document.querySelector("#agent-model").textContent`); h != "sim · sim" {
		t.Fatalf("Alice's header (agent two) says %q after one switched", h)
	}

	// Bob switches the agent Alice is attached to: model_changed.
	bob.run("open two", chromedp.Navigate(d.url()+"/#agent="+two))
	bob.until("two's picker", fmt.Sprintf(`document.querySelector(".agentview")?.dataset.selected === %q && !!document.querySelector("#model option[value='local/qwen3']")`, two))
	bob.pick("#model", "local/qwen3")
	alice.until("header and picker follow model_changed", `(h => h?.textContent === "local · qwen3" && h.dataset.provider === "local")(document.querySelector("#agent-model")) && document.querySelector("#model")?.value === "local/qwen3"`)
	alice.until("two's row too", row(two)+`.includes("local/qwen3")`)
	// Polls after the switch keep it: agent.list says the same. A poll
	// asks two lists (the live agents, the recent ones) one after the
	// other; four more agent.list sent: a whole poll has been answered.
	polls := len(sent(alice, "agent.list"))
	alice.until("two more polls", fmt.Sprintf(`window.__sent.filter(m => m.type === "agent.list").length >= %d`, polls+4))
	if !eval[bool](alice, row(one)+`.includes("local/llama") && `+row(two)+`.includes("local/qwen3") && document.querySelector("#agent-model")?.textContent === "local · qwen3"`) {
		t.Fatalf("after a poll: one %q, two %q", eval[string](alice, row(one)), eval[string](alice, row(two)))
	}

	alice.run("reload", chromedp.Reload())
	alice.online()
	alice.until("the same after a reload", row(one)+`.includes("local/llama") && `+row(two)+`.includes("local/qwen3") && document.querySelector("#agent-model")?.textContent === "local · qwen3"`)
	for _, p := range []*page{alice, bob} {
		if errs := p.consoleErrors(); len(errs) > 0 {
			t.Fatalf("%s: console errors: %q", p.name, errs)
		}
	}
}
