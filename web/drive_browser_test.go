//go:build linux

package web_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/shard-dev/shard/internal/shardtest"
)

// typeAndClick types text into the prompt box and clicks the button id
// (steer or follow-up), then waits until the box is cleared: the page
// clears it only when the command's response said success.
func (p *page) typeAndClick(text, button string) {
	p.t.Helper()
	p.run("type "+button, chromedp.SendKeys(chromedp.CSS("#prompt"), text), chromedp.Click(chromedp.CSS("#"+button)))
	p.until(button+" answered", `document.querySelector("#prompt").value === ""`)
}

// assistantTexts is the assistant messages' texts, in transcript order.
func assistantTexts(p *page) []string {
	return eval[[]string](p, `[...document.querySelectorAll(".msg.assistant")].map(e => e.textContent)`)
}

// dispatch sends key events one by one, as chromedp.KeyEvent does, so a
// test can hold back the rest of a key's events.
func dispatch(evs ...*input.DispatchKeyEventParams) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for _, e := range evs {
			if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, *e); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestDashboardSendingEnterLeavesNoNewline: the Enter that sends a prompt
// leaves no line break in the prompt box, even when the key's text arrives
// after the prompt was accepted and the box cleared. DevTools input sends
// an Enter as keydown, then its text ("\r"), then keyup; the test holds the
// text back until the box is empty, which a busy machine did by chance
// (the second prompt of TestDashboardReconnectAfterRestart then went out
// as "\nsim: say second answer"). The next prompt goes out as typed, and
// Shift+Enter still breaks the line.
func TestDashboardSendingEnterLeavesNoNewline(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	p.createAgent(t.TempDir(), "composer")

	enter := kb.Encode('\r') // keydown, its text, keyup
	if len(enter) != 3 || enter[1].Text != "\r" {
		t.Fatalf("Enter encodes as %d events; want keydown, text, keyup", len(enter))
	}
	p.run("type and press Enter", chromedp.SendKeys(chromedp.CSS("#prompt"), "sim: say first answer"), dispatch(enter[0]))
	p.until("prompt accepted and the box cleared", `[...document.querySelectorAll(".msg.user")].some(e => e.textContent === "sim: say first answer") && document.querySelector("#prompt").value === ""`)
	p.run("the Enter's text and keyup", dispatch(enter[1:]...))
	if v := eval[string](p, `document.querySelector("#prompt").value`); v != "" {
		t.Fatalf("prompt box after the sending Enter = %q; want it empty", v)
	}
	p.until("first answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "first answer") && document.querySelector("#agent-status")?.textContent === "idle"`)

	p.prompt("sim: say second answer")
	p.until("second answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "second answer")`)
	users := eval[[]string](p, `[...document.querySelectorAll(".msg.user")].map(e => e.textContent)`)
	if want := []string{"sim: say first answer", "sim: say second answer"}; strings.Join(users, "|") != strings.Join(want, "|") {
		t.Fatalf("prompts shown %q; want %q", users, want)
	}
	// Shift+Enter still makes a line break.
	p.run("Shift+Enter", chromedp.SendKeys(chromedp.CSS("#prompt"), "x"),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(kb.ModifierShift)), chromedp.SendKeys(chromedp.CSS("#prompt"), "y"))
	if v := eval[string](p, `document.querySelector("#prompt").value`); v != "x\ny" {
		t.Fatalf("prompt box after x, Shift+Enter, y = %q", v)
	}
}

// TestDashboardSteerAndFollowUp: while a turn waits on a permission
// request, a steer and a follow-up are sent from the page; the steer's
// directives run inside the turn before the rest of its script, and the
// follow-up runs as a turn of its own afterwards.
func TestDashboardSteerAndFollowUp(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	p.createAgent(t.TempDir(), "steered")

	p.prompt(`sim: tool bash {"command":"echo gate"}`, "sim: say rest of the script")
	p.until("permission dialog", `!!document.querySelector(".dialog.perm button.i-allow")`)
	p.until("steer controls", `!!document.querySelector("#steer") && !!document.querySelector("#follow-up")`)
	p.typeAndClick("sim: say steered in", "steer")
	p.typeAndClick("sim: say followed up", "follow-up")
	p.clickWhen("allow", `document.querySelector(".dialog.perm button.i-allow")`)
	p.until("both turns done", `document.querySelectorAll(".turn-end").length === 2 && document.querySelector("#agent-status")?.textContent === "idle"`)

	got := strings.Join(assistantTexts(p), "|")
	steer, rest, follow := strings.Index(got, "steered in"), strings.Index(got, "rest of the script"), strings.Index(got, "followed up")
	if steer < 0 || rest < 0 || follow < 0 || !(steer < rest && rest < follow) {
		t.Fatalf("assistant messages %q: want the steer, then the rest of the script, then the follow-up", got)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardFollowUpThenAbort: a follow-up queued behind a streaming
// turn is answered at once (accepted); an abort then cancels the turn and
// the queued follow-up with it. The page must not keep showing the
// follow-up as if it were still going to run.
func TestDashboardFollowUpThenAbort(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	p.createAgent(t.TempDir(), "aborted")

	p.prompt("sim: say working", "sim: sleep 60000", "sim: say never shown")
	p.until("streaming", `document.querySelector("#agent-status")?.textContent === "streaming" && !!document.querySelector("#abort")`)
	p.typeAndClick("sim: say queued behind", "follow-up")
	p.run("abort", chromedp.Click(chromedp.CSS("#abort")))
	p.until("abort answered", `/^abort: done/.test(document.querySelector("#notice").textContent)`)
	p.until("queued follow-up dropped", `!!document.querySelector(".msg.user.dropped")`)
	p.until("idle after the abort", `document.querySelector("#agent-status")?.textContent === "idle"`)
	p.prompt("sim: say after the abort")
	p.until("next answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "after the abort") && document.querySelector("#agent-status")?.textContent === "idle"`)
	// The follow-up was accepted (its response came: the box cleared), then
	// dropped by the abort, as the runtime does; the page says so instead
	// of showing it as still to come, and it never runs.
	p.until("dropped follow-up marked", `[...document.querySelectorAll(".msg.user.dropped")].some(e => e.textContent.includes("queued behind") && e.textContent.includes("dropped by the abort"))`)
	if n := eval[int](p, `document.querySelectorAll(".msg.queued").length`); n != 0 {
		t.Errorf("%d prompts still shown as queued after the abort", n)
	}
	if got := strings.Join(assistantTexts(p), "|"); strings.Contains(got, "queued behind") || strings.Contains(got, "never shown") {
		t.Errorf("assistant messages %q: the dropped follow-up or the aborted script ran", got)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// clients is the overview's attached-clients text of agent id.
func clientsOf(id string) string {
	return fmt.Sprintf(`document.querySelector('[data-agent=%q] .clients')?.textContent`, id)
}

// TestDashboardAttachedClients: the overview shows how many clients are
// attached to each agent (AgentInfo.attached_clients), and follows it as a
// second browser attaches and leaves.
func TestDashboardAttachedClients(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	a, c := b.newPage("alice"), b.newPage("carol")
	a.enroll(d)
	c.enroll(d)
	id := a.createAgent(t.TempDir(), "watched")
	// Alice's page is attached (interactively); Carol's only lists it.
	c.until("one client", clientsOf(id)+` === "1 attached"`)
	c.clickWhen("select", fmt.Sprintf(`document.querySelector('[data-agent=%q] .pick')`, id))
	a.until("two clients", clientsOf(id)+` === "2 attached"`)
	a.screenshot("web-attached-clients")
	c.run("leave", chromedp.Navigate("about:blank"))
	a.until("one client again", clientsOf(id)+` === "1 attached"`)
}

// TestDashboardModelForkAndUIRequest: a ui_request raised by the turn is a
// dialog whose answer the runtime receives; the model switch reaches the
// runtime (model_changed) and the overview; fork answers with the new
// session.
func TestDashboardModelForkAndUIRequest(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	id := p.createAgent(t.TempDir(), "asked")

	p.prompt("sim: ask select Colour red green blue", "sim: say chosen")
	p.until("ui dialog", `document.querySelectorAll('.dialog.ui button.choice[data-choice]').length === 3 && document.querySelector(".dialog.ui h2").textContent === "Colour"`)
	p.until("needs input in the overview", fmt.Sprintf(`document.querySelector('[data-agent=%q]')?.classList.contains("needs")`, id))
	p.screenshot("web-ui-request")
	p.clickWhen("answer green", `document.querySelector('.dialog.ui button.choice[data-choice="green"]')`)
	p.until("dialog closed", `!document.querySelector(".dialog.ui") && !!document.querySelector(".closed-note")`)
	p.until("the runtime got the answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("answer:") && e.textContent.includes("green")) && document.querySelector("#agent-status")?.textContent === "idle"`)

	p.until("model picker", `[...document.querySelectorAll("#model option")].some(o => o.value === "sim/sim-think")`)
	p.run("switch model", chromedp.SetValue(chromedp.CSS("#model"), "sim/sim-think"), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`document.querySelector("#model").dispatchEvent(new Event("change", {bubbles: true}))`)(ctx, tg)
		return err
	}))
	p.until("model switched", `/^model: done/.test(document.querySelector("#notice").textContent) && document.querySelector("#model").value === "sim/sim-think"`)
	p.until("overview follows the model", fmt.Sprintf(`document.querySelector('[data-agent=%q] .meta')?.textContent.includes("sim-think")`, id))
	p.prompt("sim: say on the new model")
	p.until("answer on the new model", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "on the new model") && document.querySelector("#agent-status")?.textContent === "idle"`)

	p.run("fork", chromedp.Click(chromedp.CSS("#fork")))
	p.until("forked", `/^fork: new session \S+/.test(document.querySelector("#notice").textContent)`)
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
