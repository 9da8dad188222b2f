//go:build linux

package web_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/web"
)

// The browser tests run the real shardd and a real headless Chromium. They
// do not run in parallel: Chromium is heavy and the machine is shared.

// TestPureModules runs the in-browser unit tests of the transcript
// reducer, the resync merge and the backoff (assets/test/unit.js).
func TestPureModules(t *testing.T) {
	b := newBrowser(t)
	srv := httptest.NewServer(web.Handler(web.Options{Tests: true}))
	defer srv.Close()
	p := b.newPage("unit")
	p.run("open the test page", chromedp.Navigate(srv.URL+"/test/"))
	p.until("tests done", `document.body.dataset.done === "1"`)
	res := eval[map[string]any](p, `JSON.parse(document.getElementById("results").textContent)`)
	t.Logf("unit tests: %v", res)
	if res["fail"].(float64) != 0 || res["pass"].(float64) < 20 {
		t.Fatalf("unit tests: %v", res)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardStreamedAnswer: an unenrolled browser sees how to enroll;
// after enrolling it streams an answer, renders tool results from their
// descriptors, and the CSP holds (no console error at all).
func TestDashboardStreamedAnswer(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)

	stranger := b.newPage("stranger")
	stranger.run("open unenrolled", chromedp.Navigate(d.url()+"/"))
	stranger.until("sign-in page", `document.querySelector("#signin")?.textContent.includes("shardctl web enroll")`)
	stranger.screenshot("web-signin")

	p := b.newPage("owner")
	p.enroll(d)
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("alpha line\nbeta line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := p.createAgent(cwd, "writer")
	p.until("listed in the overview", fmt.Sprintf(`!!document.querySelector('[data-agent=%q]')`, id))

	p.prompt("sim: think planning the answer", "sim: say part one of the answer", "sim: sleep 1500", "sim: say and part two")
	// Streaming: the first part is on screen while the message is still open.
	p.until("streamed first part", `[...document.querySelectorAll(".msg.assistant.streaming")].some(e => e.textContent.includes("part one") && !e.textContent.includes("part two"))`)
	p.until("whole answer", `[...document.querySelectorAll(".msg.assistant:not(.streaming)")].some(e => e.textContent.includes("part one of the answerand part two") || e.textContent.includes("and part two"))`)
	p.until("turn marker", `document.querySelectorAll(".turn-end").length === 1`)
	p.until("thinking block", `!!document.querySelector(".msg.assistant .thinking")`)

	// A tool result drawn from its descriptor: read renders a code block
	// with the file's path and text.
	p.prompt(`sim: tool read {"path":"notes.txt"}`, "sim: say read it")
	p.until("code descriptor", `[...document.querySelectorAll('.tool[data-name="read"] .tool-result .r-code')].some(e => e.textContent.includes("notes.txt") && e.textContent.includes("beta line"))`)
	p.until("idle again", `document.querySelector("#agent-status")?.textContent === "idle" && document.querySelectorAll(".turn-end").length === 2`)
	p.screenshot("web-dashboard")

	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors (CSP or script): %q", errs)
	}
	if errs := stranger.consoleErrors(); len(errs) > 0 {
		for _, e := range errs {
			// The unenrolled page's POST /bootstrap is answered 401 by design.
			if !strings.Contains(e, "/bootstrap") || !strings.Contains(e, "401") {
				t.Errorf("stranger console error: %s", e)
			}
		}
	}
}

// TestDashboardPermissionFirstAnswerWins: two browsers (separate browser
// contexts, separately enrolled) on the same agent see the same permission
// request; both answer at once, exactly one answer wins, and both dialogs
// close showing the same winning answer.
func TestDashboardPermissionFirstAnswerWins(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	a, c := b.newPage("alice"), b.newPage("carol")
	a.enroll(d)
	c.enroll(d)
	id := a.createAgent(t.TempDir(), "gated")
	c.run("select the agent", chromedp.Navigate(d.url()+"/#agent="+id))
	c.online()
	c.until("attached", fmt.Sprintf(`document.querySelector(".agentview")?.dataset.selected === %q && document.querySelector("#agent-status")?.textContent === "idle"`, id))

	a.prompt(`sim: tool bash {"command":"echo from-the-tool"}`, "sim: say after the tool")
	for _, p := range []*page{a, c} {
		p.until("permission dialog", `!!document.querySelector('.dialog.perm button[data-choice]')`)
		p.until("needs input in the overview", fmt.Sprintf(`document.querySelector('[data-agent=%q]')?.classList.contains("needs")`, id))
	}
	a.screenshot("web-permission")

	// Alice allows, Carol denies, at the same moment: the buttons carry the
	// server's choice ids and intents.
	allowID := eval[string](a, `document.querySelector(".dialog.perm button.i-allow").dataset.choice`)
	denyID := eval[string](c, `document.querySelector(".dialog.perm button.i-deny").dataset.choice`)
	var wg sync.WaitGroup
	for p, intent := range map[*page]string{a: "allow", c: "deny"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// ?.: the other browser's answer may already have won and
			// closed this dialog — the race this test is about.
			_ = eval[bool](p, fmt.Sprintf(`document.querySelector(".dialog.perm button.i-%s")?.click(), true`, intent))
		}()
	}
	wg.Wait()
	notes := map[string]string{}
	for _, p := range []*page{a, c} {
		p.until("dialog closed", `!document.querySelector(".dialog.perm") && !!document.querySelector(".closed-note")`)
		notes[p.name] = eval[string](p, `[...document.querySelectorAll(".closed-note")].map(e => e.textContent).join("\n")`)
		p.until("tool result", `!!document.querySelector('.tool[data-name="bash"] .tool-result')`)
	}
	if notes["alice"] != notes["carol"] || !strings.HasPrefix(notes["alice"], "Answered") || strings.Count(notes["alice"], "Answered") != 1 {
		t.Fatalf("the dialogs closed with different or several answers: %q", notes)
	}
	allowed := strings.HasSuffix(notes["alice"], ": "+allowID)
	if !allowed && !strings.HasSuffix(notes["alice"], ": "+denyID) {
		t.Fatalf("closing note %q names neither %q nor %q", notes["alice"], allowID, denyID)
	}
	t.Logf("winner: %s", notes["alice"])
	for _, p := range []*page{a, c} {
		out := eval[string](p, `[...document.querySelectorAll('.tool[data-name="bash"] .tool-result')].map(e => e.textContent).join("|")`)
		if n := eval[int](p, `document.querySelectorAll('.tool[data-name="bash"]').length`); n != 1 {
			t.Errorf("%s: %d bash tool entries, want 1", p.name, n)
		}
		if got := strings.Contains(out, "from-the-tool"); got != allowed {
			t.Errorf("%s: allowed=%v but the tool result is %q", p.name, allowed, out)
		}
	}
}

// TestDashboardReconnectAfterRestart: the daemon is killed and started
// again on the same origin; the page shows the banner, reconnects with a
// new ticket, re-attaches and resyncs: every message is there exactly once.
func TestDashboardReconnectAfterRestart(t *testing.T) {
	b := newBrowser(t)
	home := filepath.Join(shardtest.ShortTemp(t, "wb"), "home")
	port := freePort(t)
	d := startDaemon(t, home, port)
	p := b.newPage("owner")
	p.enroll(d)
	p.createAgent(t.TempDir(), "survivor")
	p.prompt("sim: say first answer")
	p.until("first answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "first answer") && document.querySelector("#agent-status")?.textContent === "idle"`)

	d.sd.Reap() // SIGKILL: no goodbye to the browser
	p.until("banner", `!!document.querySelector("#banner") && document.querySelector("#conn-state")?.textContent !== "online"`)
	p.screenshot("web-reconnecting")
	startDaemon(t, home, port)
	p.online()
	p.until("resynced", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "first answer")`)
	p.prompt("sim: say second answer")
	p.until("second answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "second answer") && document.querySelector("#agent-status")?.textContent === "idle"`)

	counts := eval[map[string]int](p, `(() => { const c = {}; for (const e of document.querySelectorAll(".msg")) c[e.textContent] = (c[e.textContent] || 0) + 1; return c; })()`)
	for _, want := range []string{"sim: say first answer", "first answer", "sim: say second answer", "second answer"} {
		if counts[want] != 1 {
			t.Errorf("message %q shown %d times, want once (all: %v)", want, counts[want], counts)
		}
	}
	if len(counts) != 4 {
		t.Errorf("messages: %v, want exactly the two prompts and two answers", counts)
	}
}

// TestDashboardRevokedSession: revoking the browser's session closes its
// connection and the page goes back to a clear signed-out page.
func TestDashboardRevokedSession(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	d.ctl("web", "sessions", "revoke", "--all")
	p.until("signed out", `document.querySelector("#signin h1")?.textContent === "Signed out" && document.querySelector("#signin")?.textContent.includes("shardctl web enroll")`)
	p.run("reload", chromedp.Reload())
	p.until("still signed out after a reload", `document.querySelector("#signin h1")?.textContent === "Signed out"`)
}

// TestDashboardDelegatedRequestAndJobs: the selected agent launches a
// subagent job; the job and its run show in the jobs panel and follow
// subagent_run_changed live; the child's permission request reaches the
// page through its interactive ancestor and names the child.
func TestDashboardDelegatedRequestAndJobs(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	parent := p.createAgent(t.TempDir(), "lead")
	p.prompt(`sim: subagent helper sim: tool bash {"command":"echo from-the-child"}`)
	p.until("job listed", `!!document.querySelector("#jobs .job .run")`)
	// Allow whatever the parent itself asks first; stop at the child's.
	for i := 0; ; i++ {
		p.until("a permission dialog", `!!document.querySelector(".dialog.perm button.i-allow")`)
		if eval[bool](p, `!!document.querySelector(".dialog.perm .delegated")`) {
			break
		}
		if i > 3 {
			t.Fatal("no delegated request after the parent's own")
		}
		p.clickWhen("answered", `document.querySelector(".dialog.perm button.i-allow")`)
		p.until("closed", `!document.querySelector(".dialog.perm:not(:has(.delegated))")`)
	}
	text := eval[string](p, `document.querySelector(".dialog.perm .delegated").textContent`)
	if !strings.HasPrefix(text, "Asked by subagent") || strings.Contains(text, parent) {
		t.Fatalf("delegated note %q", text)
	}
	p.run("dark theme", chromedp.Click(chromedp.CSS("#theme")))
	p.until("dark", `document.documentElement.dataset.theme === "dark"`)
	p.screenshot("web-delegated-dark")
	p.clickWhen("answered", `document.querySelector(".dialog.perm button.i-allow")`)
	p.until("run completed live", `document.querySelector("#jobs .run .state")?.textContent === "completed"`)
	p.run("phone size", chromedp.EmulateViewport(390, 844))
	p.until("stacked layout", `getComputedStyle(document.querySelector(".cols")).gridTemplateColumns.split(" ").length === 1`)
	p.screenshot("web-phone")
}

// TestDashboardControls: abort while streaming, a mode switch that every
// view follows (mode_changed), and compact.
func TestDashboardControls(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	id := p.createAgent(t.TempDir(), "driver")

	p.prompt("sim: say working", "sim: sleep 30000", "sim: say never shown")
	p.until("streaming controls", `document.querySelector("#agent-status")?.textContent === "streaming" && !!document.querySelector("#abort")`)
	p.run("abort", chromedp.Click(chromedp.CSS("#abort")))
	p.until("idle after the abort", `document.querySelector("#agent-status")?.textContent === "idle"`)
	p.prompt("sim: say after the abort")
	p.until("next answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "after the abort") && document.querySelector("#agent-status")?.textContent === "idle"`)
	if eval[bool](p, `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("never shown"))`) {
		t.Fatal("the aborted turn kept streaming")
	}

	p.run("switch mode", chromedp.SetValue(chromedp.CSS("#mode"), "plan"), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`document.querySelector("#mode").dispatchEvent(new Event("change", {bubbles: true}))`)(ctx, tg)
		return err
	}))
	p.until("mode changed everywhere", fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes("plan") && document.querySelector("#mode").value === "plan"`, id))
	p.run("compact", chromedp.Click(chromedp.CSS("#compact")))
	p.until("compact answered", `/^compact: (done|NOT_FOUND|CONFLICT)/.test(document.querySelector("#notice").textContent)`)
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
