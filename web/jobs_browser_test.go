//go:build linux

package web_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/internal/shardtest"
)

// cardStates is a JavaScript expression: the states the job card in the
// transcript shows for its runs.
const cardStates = `[...document.querySelectorAll("#transcript .jobcard .jc-run .state")].map(e => e.textContent)`

// TestDashboardSteerRelaunchAndJobCard drives a child run from the page:
// the parent's subagent call is drawn as a job card (not JSON) whose run
// state follows subagent_run_changed live; while the child's turn waits on
// a permission, a steer is sent from the jobs panel and answered injected
// (subagent.steer); the child's turn runs it, and the panel lists the
// steer recorded against the run (RunSnapshot.steers: source, outcome,
// turn, time; never the text). Once the run has completed it
// is relaunched from the panel with a new task (subagent.relaunch of a
// completed run: same agent, new job), and the card's link opens the child,
// whose transcript has both the steered text and the relaunched task's.
func TestDashboardSteerRelaunchAndJobCard(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	parent := p.createAgent(t.TempDir(), "lead")

	// The child's only step is a gated tool: its turn waits on the
	// permission (delegated to this page) with the run active.
	p.prompt(`sim: subagent helper sim: tool bash {"command":"echo child gate"}`)
	p.until("job card", `!!document.querySelector('#transcript .tool[data-name="subagent"] .jobcard .jc-run')`)
	if raw := eval[bool](p, `[...document.querySelectorAll('#transcript .tool[data-name="subagent"] pre.out')].some(e => e.textContent.includes("job_id"))`); raw {
		t.Fatal("the subagent tool's result is drawn as raw JSON")
	}
	p.until("child's permission request", `!!document.querySelector(".dialog.perm .delegated")`)
	p.until("card shows the run active", cardStates+`.includes("active")`)
	p.until("panel shows the run active", `[...document.querySelectorAll("#jobs .run .state")].some(e => e.textContent === "active")`)
	child := eval[string](p, `document.querySelector("#jobs .run").dataset.agentId`)
	if child == "" || child == parent {
		t.Fatalf("run's agent %q (parent %q)", child, parent)
	}

	p.clickWhen("open steer", `[...document.querySelectorAll("#jobs .run button")].find(b => b.textContent === "Steer…")`)
	p.run("steer", chromedp.SendKeys(chromedp.CSS(`#jobs .run form.steer input`), "sim: say steered child"),
		chromedp.Click(chromedp.CSS(`#jobs .run form.steer button[type=submit]`)))
	// The steer drains at the child's next provider call, after the tool:
	// allow it, then the answer comes.
	p.until("steer injected", allowing(`document.querySelector("#jobs .run .run-out.steer")?.dataset.status === "injected"`))
	if got := eval[string](p, `document.querySelector("#jobs .run .run-out.steer").textContent`); got == "" {
		t.Fatal("no steer outcome shown")
	}
	// The run records the steer (RunSnapshot.steers): the panel lists it
	// with its source, outcome, turn and time, never its text.
	turn := eval[string](p, `document.querySelector("#jobs .run .run-out.steer").dataset.turn`)
	if turn == "" {
		t.Fatal("the injected steer's answer names no turn")
	}
	p.until("the steer recorded against the run", fmt.Sprintf(
		`[...document.querySelectorAll("#jobs .run .run-steers .rsteer")].some(e => e.dataset.source === "parent" && e.dataset.status === "injected" && e.dataset.turn === %q && !!e.querySelector("time[datetime]"))`, turn))
	if txt := eval[string](p, `document.querySelector("#jobs .run .run-steers").textContent`); strings.Contains(txt, "steered child") || !strings.Contains(txt, "parent steer") {
		t.Fatalf("the recorded steers read %q", txt)
	}
	p.until("card follows the run to completed", allowing(cardStates+`.includes("completed")`))
	p.until("the job ended too, in the card and the panel", `document.querySelector("#transcript .jobcard .jc-head .state")?.textContent === "completed" && document.querySelector("#jobs .job > div .state")?.textContent === "completed"`)
	p.screenshot("web-job-card")

	// Relaunch the completed run with a new task.
	p.clickWhen("open relaunch", `[...document.querySelectorAll("#jobs .run.rs-completed button")].find(b => b.textContent === "Relaunch…")`)
	p.run("relaunch task", chromedp.SendKeys(chromedp.CSS(`#jobs .run form.relaunch input`), "sim: say relaunched child"),
		chromedp.Click(chromedp.CSS(`#jobs .run form.relaunch button[type=submit]`)))
	p.until("relaunch answered", `/^relaunch: /.test(document.querySelector("#notice").textContent)`)
	if n := eval[string](p, `document.querySelector("#notice").textContent`); n != "relaunch: done" {
		t.Fatalf("relaunch: the page says %q", n)
	}
	p.until("a second job of the same child completes", allowing(fmt.Sprintf(
		`document.querySelectorAll('#jobs .job').length === 2 && [...document.querySelectorAll('#jobs .run[data-agent-id=%q]')].every(e => e.classList.contains("rs-completed"))`, child)))

	// The card's link opens the child.
	p.clickWhen("open the child from the card", fmt.Sprintf(`document.querySelector('#transcript .jobcard a.jc-open[href="#agent=%s"]')`, child))
	p.until("child selected", fmt.Sprintf(`document.querySelector(".agentview")?.dataset.selected === %q`, child))
	p.until("child's transcript has the steer and the relaunched task",
		`(t => t.includes("steered child") && t.includes("relaunched child"))([...document.querySelectorAll(".msg.assistant")].map(e => e.textContent).join("|"))`)
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardSteerConflict: a steer into a run whose turn ends before
// the steer reaches a provider boundary resolves conflict (strict steer,
// docs/protocol.md §10.3: dropped, never kept as a later prompt), and the
// page shows that answer where the person steered instead of pretending it
// was delivered, and lists the conflict recorded against the run. The child sleeps inside its only provider call, so the
// steer waits; stopping the run ends the turn first.
func TestDashboardSteerConflict(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	p.createAgent(t.TempDir(), "lead")

	p.prompt(`sim: subagent sleeper sim: sleep 600000`)
	p.until("run active", allowing(`[...document.querySelectorAll("#jobs .run .state")].some(e => e.textContent === "active")`))
	p.clickWhen("open steer", `[...document.querySelectorAll("#jobs .run button")].find(b => b.textContent === "Steer…")`)
	p.run("steer", chromedp.SendKeys(chromedp.CSS(`#jobs .run form.steer input`), "sim: say too late"),
		chromedp.Click(chromedp.CSS(`#jobs .run form.steer button[type=submit]`)))
	p.clickWhen("stop", `[...document.querySelectorAll("#jobs .run button")].find(b => b.textContent === "Stop")`)
	p.until("steer answered", `!!document.querySelector("#jobs .run .run-out.steer")`)
	if st := eval[string](p, `document.querySelector("#jobs .run .run-out.steer").dataset.status`); st != "conflict" {
		t.Fatalf("steer into a turn that was stopped first: %q, want conflict (%s)", st,
			eval[string](p, `document.querySelector("#jobs .run .run-out.steer").textContent`))
	}
	// Recorded against the run as what it was: a conflict, with no turn.
	p.until("the conflict recorded against the run", `[...document.querySelectorAll("#jobs .run .run-steers .rsteer")].some(e => e.dataset.source === "parent" && e.dataset.status === "conflict")`)
	if txt := eval[string](p, `document.querySelector("#jobs .run .run-steers").textContent`); strings.Contains(txt, "too late") {
		t.Fatalf("the recorded steers show the message: %q", txt)
	}
}
