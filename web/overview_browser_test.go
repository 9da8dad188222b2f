package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/store"
)

// TestDashboardOverviewLiveAndRecent: the overview asks for the live and
// the recent agents (agent.list active, since_ms, paged; docs/protocol.md
// §10.1, §13), not every agent the daemon ever held: an agent created a
// month ago, idle and stopped, stays off it while the daemon still lists it.
func TestDashboardOverviewLiveAndRecent(t *testing.T) {
	b := newBrowser(t)
	home := filepath.Join(shardtest.ShortTemp(t, "wb"), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(home, "shard.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	old := ids.New(ids.Agent)
	if err := st.CreateAgent(store.Agent{AgentID: old, SessionID: ids.New(ids.Session), Cwd: t.TempDir(), Name: "ancient",
		CreatedAt: time.Now().Add(-30 * 24 * time.Hour).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, home, 0)
	if ls := d.ctl("agents", "ls"); !strings.Contains(ls, "ancient") {
		t.Fatalf("the daemon does not list the old agent:\n%s", ls)
	}

	p := b.newPage("owner")
	p.recordSent()
	p.enroll(d)
	fresh := p.createAgent(t.TempDir(), "fresh")
	p.until("the new agent listed", fmt.Sprintf(`!!document.querySelector('[data-agent=%q]')`, fresh))
	// A whole poll after the create has been answered: two lists, each
	// sent after the one before it was answered.
	polls := len(sent(p, "agent.list"))
	p.until("a whole poll", fmt.Sprintf(`window.__sent.filter(m => m.type === "agent.list").length >= %d`, polls+4))
	if eval[bool](p, fmt.Sprintf(`!!document.querySelector('[data-agent=%q]')`, old)) {
		t.Fatal("the overview shows a month-old idle agent")
	}
	var active, recent bool
	for _, m := range sent(p, "agent.list") {
		if m["limit"] == nil {
			t.Fatalf("an unbounded agent.list: %v", m)
		}
		active = active || m["active"] == true
		recent = recent || m["since_ms"] != nil
	}
	if !active || !recent {
		t.Fatalf("agent.list sent: %v", sent(p, "agent.list"))
	}
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}
