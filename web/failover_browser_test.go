//go:build linux

package web_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/chromedp"
)

// TestDashboardFailover: the page of n2 in a three-node cluster (each
// node on its own loopback address, the browser enrolled with n2 and n3)
// shows n1's agent through n2. n2 is SIGKILLed, and a turn runs on n1
// while the page is away. The page, its node not answering, goes to n3's
// dashboard (the next node after n2 in its last cluster.status) with the
// agent in the address; there it authenticates with n3's session, shows
// the same agent with both turns (the attach's sync is the resync) and
// the note "reconnected through node n3; node n2 is gone"
// (docs/protocol.md §13 "A client's node dies"), and a prompt typed then
// runs through n3.
func TestDashboardFailover(t *testing.T) {
	b := newBrowser(t)
	nodes := startCluster(t, 3, "127.0.0.1", "127.0.0.2", "127.0.0.3")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	p := b.newPage("failover")
	p.recordSent()
	p.enroll(n3) // each node keeps its own sessions: the browser enrolls with both
	p.enroll(n2)
	p.until("the cluster chip", `document.querySelector("#cluster summary")?.textContent === "node n2 · 3/3 alive"`)
	p.until("the other nodes' dashboards", `document.querySelectorAll("#cluster .cn .dash a").length === 2`)

	agent := n1.ctl("agents", "create", "--cwd", t.TempDir())
	p.until("n1's agent listed", fmt.Sprintf(`document.querySelector('[data-agent=%q]')?.dataset.node === "n1"`, agent))
	p.run("open n1's agent", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-agent=%q] .pick`, agent))))
	p.until("its view", fmt.Sprintf(`document.querySelector(".agentview")?.dataset.selected === %q && document.querySelector("#agent-status")?.textContent === "idle"`, agent))
	p.prompt("sim: say before the failover")
	p.until("the first answer", `[...document.querySelectorAll(".msg.assistant:not(.streaming)")].some(e => e.textContent.includes("before the failover")) && document.querySelector("#agent-status")?.textContent === "idle"`)
	if got := eval[string](p, `location.origin`); got != n2.url() {
		t.Fatalf("the page is at %s, want n2's %s", got, n2.url())
	}

	n2.sd.Kill()
	n1.ctl("prompt", agent, "sim: say while the page was away")
	p.untilAcross(clusterReady, "the page on n3, with the note", fmt.Sprintf(`location.origin === %q && (el => !!el && el.dataset.from === "n2" && el.dataset.to === "n3" && el.textContent.includes("reconnected through node n3; node n2 is gone"))(document.querySelector("#moved"))`, n3.url()))
	p.online()
	p.until("the same agent through n3", fmt.Sprintf(`document.querySelector(".agentview")?.dataset.selected === %q && document.querySelector("#agent-status")?.textContent === "idle"`, agent))
	p.until("both turns, the missed one from the resync", `(t => t.includes("before the failover") && t.includes("while the page was away"))([...document.querySelectorAll(".msg.assistant:not(.streaming)")].map(e => e.textContent).join("|"))`)
	if got := eval[string](p, `location.hash`); got != "#agent="+agent {
		t.Fatalf("address after the move: %q", got)
	}
	if got := eval[string](p, `document.querySelector("#cluster summary")?.textContent || ""`); !strings.HasPrefix(got, "node n3 ·") {
		t.Fatalf("the chip after the move: %q", got)
	}
	answers := eval[[]string](p, `[...document.querySelectorAll(".msg.assistant:not(.streaming)")].map(e => e.textContent)`)
	if n := strings.Count(strings.Join(answers, "|"), "while the page was away"); n != 1 {
		t.Fatalf("the missed turn shown %d times: %q", n, answers)
	}

	p.prompt("sim: say after the failover")
	p.until("a prompt through n3", `[...document.querySelectorAll(".msg.assistant:not(.streaming)")].some(e => e.textContent.includes("after the failover"))`)
	p.run("dismiss the note", chromedp.Click(chromedp.CSS(`#moved .dismiss`)))
	p.until("the note gone", `!document.querySelector("#moved")`)
	// The one failure the page meets is its lost node's refusal, which
	// Chromium logs on its own.
	for _, e := range p.consoleErrors() {
		if !strings.Contains(e, "ERR_CONNECTION_REFUSED "+n2.url()+"/") {
			t.Fatalf("console error: %q", e)
		}
	}
}

// untilAcross is untilWithin across a navigation: a poll whose page goes
// away (chromedp's "navigated or closed", a destroyed context) polls again
// on the page that replaced it, until d has passed.
func (p *page) untilAcross(d time.Duration, what, expr string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, d)
	defer cancel()
	for {
		err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d))(ctx, t)
			return err
		}))
		if err == nil {
			return
		}
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || !navigatedAway(err) {
			p.t.Fatalf("%s: wait for %s: %v\nconsole: %q", p.name, what, err, p.consoleErrors())
		}
	}
}

// navigatedAway says err is a poll's page going away under it: the
// DevTools server's error -32000 ("Inspected target navigated or closed",
// "Execution context was destroyed").
func navigatedAway(err error) bool {
	var ce *cdproto.Error
	return errors.As(err, &ce) && ce.Code == -32000
}
