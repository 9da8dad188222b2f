//go:build linux

package web_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/internal/shardtest"
)

// forkedAgent enrolls a page, creates an agent with one answered turn and
// forks its session from the page's forks panel; it returns the page, the
// agent's id and the fork's session id as the panel lists it
// (session_op list).
func forkedAgent(t *testing.T) (*page, string, string) {
	t.Helper()
	b := newBrowser(t)
	d := startDaemon(t, filepath.Join(shardtest.ShortTemp(t, "wb"), "home"), 0)
	p := b.newPage("owner")
	p.enroll(d)
	id := p.createAgent(t.TempDir(), "source")
	p.prompt("sim: say before the fork")
	p.until("answer", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "before the fork") && document.querySelector("#agent-status")?.textContent === "idle"`)
	p.until("the session listed, no forks", `!!document.querySelector("#forks-session") && document.querySelectorAll("#forks .fork").length === 0`)
	p.run("fork", chromedp.Click(chromedp.CSS("#forks-fork")))
	p.until("fork listed", `document.querySelectorAll("#forks .fork").length === 1 && !!document.querySelector("#forks .fork").dataset.session`)
	sess := eval[string](p, `document.querySelector("#forks .fork").dataset.session`)
	if want := eval[string](p, `document.querySelector("#notice").textContent`); want != "fork: new session "+sess {
		t.Fatalf("notice %q; the listed fork's session is %q", want, sess)
	}
	return p, id, sess
}

// TestDashboardForkList: forks made from the forks panel and from the
// header's Fork button both show in the panel (session_op fork, then
// session_op list), each with its session, and the source keeps its own.
func TestDashboardForkList(t *testing.T) {
	p, _, first := forkedAgent(t)
	src := eval[string](p, `document.querySelector("#forks-session code").textContent`)
	p.run("fork from the header", chromedp.Click(chromedp.CSS("#fork")))
	p.until("two forks", `document.querySelectorAll("#forks .fork").length === 2`)
	sessions := eval[[]string](p, `[...document.querySelectorAll("#forks .fork")].map(e => e.dataset.session)`)
	if sessions[0] != first || sessions[1] == "" || sessions[1] == first || sessions[0] == src || sessions[1] == src {
		t.Fatalf("forks' sessions %q (first %q, source %q)", sessions, first, src)
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// TestDashboardOpenFork: a fork listed in the panel is opened as an agent
// (agent.create {cwd, session_id: the fork's session}, docs/protocol.md
// §9.2, §10.1): the new agent is selected, its transcript is the fork's
// window, and it answers on it; the source agent is still there.
func TestDashboardOpenFork(t *testing.T) {
	p, src, _ := forkedAgent(t)
	p.clickWhen("open the fork", `document.querySelector("#forks .fork .fork-open")`)
	p.until("fork opened", `/^open fork: /.test(document.querySelector("#notice").textContent)`)
	if n := eval[string](p, `document.querySelector("#notice").textContent`); n != "open fork: done" {
		t.Fatalf("open fork: the page says %q", n)
	}
	p.until("the fork's agent selected, idle", fmt.Sprintf(`(s => !!s && s !== %q)(document.querySelector(".agentview")?.dataset.selected) && document.querySelector("#agent-status")?.textContent === "idle"`, src))
	p.until("the fork's window", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "before the fork")`)
	p.prompt("sim: say on the fork")
	p.until("answer on the fork", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent === "on the fork") && document.querySelector("#agent-status")?.textContent === "idle"`)
	p.until("source still listed", fmt.Sprintf(`!!document.querySelector('[data-agent=%q]')`, src))
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
