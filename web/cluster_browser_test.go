//go:build linux

package web_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/internal/shardtest"
)

// clusterReady bounds a clustered node's start: it serves clients only
// once a quorum of the cluster is up (a JetStream meta-leader). The wait
// ends at that signal; the bound is for a loaded 2-core machine.
const clusterReady = 90 * time.Second

// startCluster starts n real shardd nodes (n1, n2, …) on loopback, each on
// its own home with its web page on a port of its own, and waits until
// every one serves. hosts, when given, are the nodes' loopback web
// addresses (--web-host), one per node: a browser keeps cookies by host,
// not port, so nodes on one address would share (and overwrite) one
// session cookie.
func startCluster(t *testing.T, n int, hosts ...string) []*daemon {
	t.Helper()
	nodes, _ := startClusterRestartable(t, n, hosts...)
	return nodes
}

// startClusterRestartable is startCluster, and a restart of node i on
// its home and port (after the test killed it), which waits until it
// serves again.
func startClusterRestartable(t *testing.T, n int, hosts ...string) ([]*daemon, func(i int) *daemon) {
	t.Helper()
	shardd, _ := built(t)
	mesh := clustertest.NewMesh(t, n)
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	token := "cluster-token-" + hex.EncodeToString(b)
	start := func(i int, home string, port int) *daemon {
		d := &daemon{t: t, home: home, port: port, stderr: &shardtest.Buffer{}}
		args := []string{"--web-port", strconv.Itoa(d.port), "--store.no-sync",
			"--cluster.node", fmt.Sprintf("n%d", i+1), "--cluster.listen", "127.0.0.1:0",
			"--cluster.advertise", mesh.Advertise(i), "--cluster.routes", strings.Join(mesh.Routes(i), ","),
			"--cluster.lease", "3s"}
		if len(hosts) > 0 {
			args = append(args, "--web-host", hosts[i])
		}
		sd, err := shardtest.StartDaemon(shardtest.DaemonOptions{
			Shardd: shardd, Home: home,
			Args:   args,
			Env:    []string{"SHARD_CLUSTER_TOKEN=" + token},
			Stderr: io.MultiWriter(d.stderr, mesh.RouteWatcher(i)),
		})
		if err != nil {
			t.Fatal(err)
		}
		d.sd = sd
		t.Cleanup(func() {
			sd.Reap()
			if t.Failed() {
				if b, err := sd.Log(20000); err == nil {
					t.Logf("shardd.log (%s):\n%s", home, b)
				}
			}
		})
		return d
	}
	ready := func(d *daemon) {
		if err := d.sd.WaitReady(clusterReady); err != nil {
			t.Fatalf("%v\n%s", err, d.stderr.String())
		}
		if err := d.sd.WaitDiscovery(readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	nodes := make([]*daemon, n)
	for i := range nodes {
		nodes[i] = start(i, t.TempDir(), freePort(t))
	}
	for _, d := range nodes {
		ready(d)
	}
	restart := func(i int) *daemon {
		t.Helper()
		d := start(i, nodes[i].home, nodes[i].port)
		ready(d)
		nodes[i] = d
		return d
	}
	return nodes, restart
}

// untilWithin is until with its own bound (run caps a step at
// stepTimeout): a lease running out on a busy machine may take longer.
func (p *page) untilWithin(d time.Duration, what, expr string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, d)
	defer cancel()
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d))(ctx, t)
		return err
	}))
	if err != nil {
		p.t.Fatalf("%s: wait for %s: %v\nconsole: %q", p.name, what, err, p.consoleErrors())
	}
}

// TestDashboardCluster: the page of n2 in a three-node cluster shows the
// cluster (cluster.status: every node alive with its incarnation and load,
// n2 marked as the page's), n3's workspace as n3's with its diff read
// through n2, every agent's node (AgentInfo.node), n3's agent
// marked as another node's. Opening n3's agent attaches it through n2 like
// the page's own (docs/protocol.md §13 "Agents of other nodes"): its view,
// a prompt typed on n2's page and its answer streamed from n3. n3 killed,
// the chip shows it dead, and opening its agent again shows the note of an
// unreachable node (NODE_UNAVAILABLE), not a failure. The panel links
// n1's and n3's dashboards (their published web_url), and n3's link goes
// when it dies.
func TestDashboardCluster(t *testing.T) {
	b := newBrowser(t)
	nodes := startCluster(t, 3)
	n2, n3 := nodes[1], nodes[2]

	// A workspace of n3, with a change on its branch.
	_, far := newWorkspace(t, n3, "far")
	if err := os.WriteFile(filepath.Join(far.Workspace.Cwd, "far.txt"), []byte("made on n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	p := b.newPage("n2")
	p.recordSent()
	p.enroll(n2)
	p.until("the cluster chip", `document.querySelector("#cluster summary")?.textContent === "node n2 · 3/3 alive"`)
	// n2's workspaces panel lists n3's workspace as n3's, and its diff
	// opens through n2 (workspace.diff reaches the node holding it).
	farSel := fmt.Sprintf(`document.querySelector('[data-workspace=%q]')`, far.Workspace.WorkspaceID)
	p.until("n3's workspace listed as n3's", fmt.Sprintf(`(el => !!el && el.dataset.node === "n3" && el.querySelector(".badge.node")?.textContent === "on n3")(%s)`, farSel))
	p.run("n3's workspace's diff", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-workspace=%q] .wbtns button`, far.Workspace.WorkspaceID))))
	p.until("its diff, from n3", `(el => !!el && el.textContent.includes("far.txt"))(document.querySelector("#ws-diff"))`)
	p.run("close the diff", chromedp.Click(chromedp.CSS(`#ws-diff .wsdiff-head button:last-child`)))
	rows := eval[[]string](p, `[...document.querySelectorAll("#cluster .cn")].map(r => [r.dataset.node, r.dataset.health, r.dataset.incarnation, r.dataset.self].join(" "))`)
	if strings.Join(rows, ",") != "n1 alive 1 ,n2 alive 1 1,n3 alive 1 " {
		t.Fatalf("cluster rows: %q", rows)
	}
	// Each other alive node's row links its dashboard, at the web address
	// the node published (cluster.status web_url); the page's own row
	// does not. The link serves that node's dashboard.
	webs := make([]string, len(nodes))
	for i, d := range nodes {
		u, err := d.sd.WebURL()
		if err != nil {
			t.Fatal(err)
		}
		webs[i] = u + "/"
	}
	p.until("the dashboard links", `document.querySelectorAll("#cluster .cn .dash a").length === 2`)
	links := eval[[]string](p, `[...document.querySelectorAll("#cluster .cn")].map(r => r.dataset.node + " " + (r.querySelector(".dash a")?.getAttribute("href") || "-"))`)
	if want := []string{"n1 " + webs[0], "n2 -", "n3 " + webs[2]}; strings.Join(links, ",") != strings.Join(want, ",") {
		t.Fatalf("dashboard links %q, want %q", links, want)
	}
	resp, err := http.Get(webs[2])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<title>") {
		t.Fatalf("n3's dashboard link: %d %.200s", resp.StatusCode, body)
	}

	local := p.createAgent(t.TempDir(), "here")
	// The form offers the other alive nodes: an agent made for n1 from
	// n2's page is hosted on n1 (agent.create node) and opens like any.
	p.until("the node choice", `[...document.querySelectorAll("#create-node option")].map(o => o.value + "=" + o.textContent).join(",") === "=this node (n2),n1=n1,n3=n3"`)
	p.run("choose n1", chromedp.SetValue(chromedp.CSS("#create-node"), "n1"))
	p.until("n1 chosen", `(el => (el.dispatchEvent(new Event("change", {bubbles: true})), el.value === "n1"))(document.querySelector("#create-node"))`)
	onN1 := p.createAgent(t.TempDir(), "yonder")
	// Listed once n1 publishes it to the agent directory.
	p.until("the agent made for n1 listed as n1's", fmt.Sprintf(`(el => !!el && el.dataset.node === "n1" && el.classList.contains("remote"))(document.querySelector('[data-agent=%q]'))`, onN1))
	if sentNode := func() string {
		for _, m := range sent(p, "agent.create") {
			if m["name"] == "yonder" {
				n, _ := m["node"].(string)
				return n
			}
		}
		return ""
	}(); sentNode != "n1" {
		t.Fatalf("agent.create for n1 carried node %q", sentNode)
	}
	remote := n3.ctl("agents", "create", "--cwd", t.TempDir())
	p.until("n3's agent listed, marked as n3's", fmt.Sprintf(`(el => !!el && el.dataset.node === "n3" && el.classList.contains("remote") && el.querySelector(".badge.node.remote")?.textContent === "on n3")(document.querySelector('[data-agent=%q]'))`, remote))
	if got := eval[string](p, fmt.Sprintf(`(el => el.dataset.node + "|" + el.classList.contains("remote") + "|" + el.querySelector(".badge.node").textContent)(document.querySelector('[data-agent=%q]'))`, local)); got != "n2|false|n2" {
		t.Fatalf("the page's own agent: %s", got)
	}
	// n2's load counts its agent at the next heartbeat and refresh.
	p.until("n2's load", `(document.querySelector('#cluster .cn[data-node="n2"] .load')?.textContent || "").startsWith("1 agent ")`)

	// n3's agent, opened on n2's page: attached, prompted, streamed.
	p.run("open n3's agent", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-agent=%q] .pick`, remote))))
	p.until("n3's agent's view", fmt.Sprintf(`document.querySelector(".agentview")?.dataset.selected === %q && !document.querySelector("#remote-agent") && document.querySelector("#agent-status")?.textContent === "idle"`, remote))
	attached := false
	for _, m := range sent(p, "agent.attach") {
		attached = attached || m["agent_id"] == remote
	}
	if !attached {
		t.Fatal("the page sent no agent.attach of n3's agent")
	}
	p.prompt("sim: say streamed from n3", "sim: sleep 1500", "sim: say and done")
	p.until("the first part streamed", `[...document.querySelectorAll(".msg.assistant.streaming")].some(e => e.textContent.includes("streamed from n3") && !e.textContent.includes("and done"))`)
	p.until("the whole answer", `[...document.querySelectorAll(".msg.assistant:not(.streaming)")].some(e => e.textContent.includes("and done"))`)
	p.until("the turn's end", `document.querySelectorAll(".turn-end").length === 1 && document.querySelector("#agent-status")?.textContent === "idle"`)
	if got := eval[string](p, fmt.Sprintf(`document.querySelector('[data-agent=%q] .badge.node')?.textContent || ""`, remote)); got != "on n3" {
		t.Fatalf("n3's agent's badge while attached: %q", got)
	}

	// Back to the page's own agent: it attaches and shows its view.
	p.run("open the local agent", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-agent=%q] .pick`, local))))
	p.until("the local agent's view", fmt.Sprintf(`document.querySelector(".agentview")?.dataset.selected === %q && !document.querySelector("#remote-agent") && document.querySelector("#agent-status")?.textContent === "idle"`, local))
	if errs := p.consoleErrors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}

	// n3 SIGKILLed: once its lease has run out, n2's page shows it dead
	// from a later cluster.status (no event says so), and its agent still
	// listed as n3's; opening it shows why it cannot be reached.
	p.run("choose n3 in the form", chromedp.SetValue(chromedp.CSS("#create-node"), "n3"))
	p.until("n3 chosen", `(el => (el.dispatchEvent(new Event("change", {bubbles: true})), el.value === "n3"))(document.querySelector("#create-node"))`)
	n3.sd.Kill()
	p.untilWithin(clusterReady, "n3 dead in the chip", `document.querySelector("#cluster summary")?.textContent === "node n2 · 2/3 alive" && document.querySelector("#cluster").classList.contains("degraded") && document.querySelector('#cluster .cn[data-node="n3"]')?.dataset.health === "dead"`)
	if got := eval[string](p, fmt.Sprintf(`document.querySelector('[data-agent=%q]')?.dataset.node || ""`, remote)); got != "n3" {
		t.Fatalf("n3's agent after n3 died: node %q", got)
	}
	// Its badge says its node is down: its status is only what n3 last
	// published.
	p.until("n3's agent's badge says n3 is dead", fmt.Sprintf(`document.querySelector('[data-agent=%q] .badge.node.down')?.textContent === "on n3 · dead"`, remote))
	p.run("open n3's agent again", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-agent=%q] .pick`, remote))))
	p.until("the note of an unreachable node", fmt.Sprintf(`(el => !!el && el.dataset.node === "n3" && el.textContent.includes("lives on node n3, which this page's daemon cannot reach now: node n3 is unavailable"))(document.querySelector('#remote-agent[data-selected=%q]'))`, remote))
	if notice := eval[string](p, `document.querySelector("#notice").textContent`); strings.Contains(notice, "attach") || strings.Contains(notice, "unavailable") {
		t.Fatalf("the refusal shown as a failure: %q", notice)
	}
	if got := eval[int](p, `document.querySelectorAll('#cluster .cn[data-node="n3"] .dash a').length`); got != 0 {
		t.Fatal("a dead node's dashboard is still linked")
	}

	// n3, chosen in the form before it died, is offered no more and not
	// sent: the next agent is made on the page's node.
	p.until("n3 no longer offered", `![...document.querySelectorAll("#create-node option")].some(o => o.value === "n3")`)
	after := p.createAgent(t.TempDir(), "after-n3")
	for _, m := range sent(p, "agent.create") {
		if n, ok := m["node"]; ok && m["name"] == "after-n3" {
			t.Fatalf("agent.create after n3 died carried node %v", n)
		}
	}
	p.until("the agent made after n3 died listed as n2's", fmt.Sprintf(`document.querySelector('[data-agent=%q]')?.dataset.node === "n2"`, after))
}

// TestDashboardSingleSharddNoCluster: a single shardd answers
// cluster.status {enabled: false}; the page shows no chip and no node.
func TestDashboardSingleSharddNoCluster(t *testing.T) {
	b := newBrowser(t)
	d := startDaemon(t, t.TempDir(), freePort(t))
	p := b.newPage("single")
	p.recordSent()
	p.enroll(d)
	id := p.createAgent(t.TempDir(), "solo")
	p.until("cluster.status answered", `document.querySelector(".app")?.dataset.cluster === "off"`)
	if got := eval[string](p, fmt.Sprintf(`(document.querySelectorAll("#cluster").length) + "|" + document.querySelectorAll(".badge.node").length + "|" + document.querySelector('[data-agent=%q]').dataset.node`, id)); got != "0|0|" {
		t.Fatalf("single shardd: chips|badges|node = %s", got)
	}
}
