package daemon_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"

	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/actortest"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/protocol"
)

func TestRuntimeKill9LeavesDaemonServing(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	a := h.create(c, nil)
	b := h.create(c, nil)
	attach(t, c, a, "")

	pids := runtimePIDs(t, a)
	if len(pids) != 1 {
		t.Fatalf("runtime processes of %s: %v", a, pids)
	}
	killPID(pids[0])
	exited := waitFor(t, c, isAgentEvent(protocol.TypeAgentExited, a)).Msg.(*protocol.AgentExited)
	if exited.RuntimeState != protocol.RuntimeFailed || exited.Reason == "" {
		t.Fatalf("agent_exited = %+v", exited)
	}
	// Attached clients learn it too, as an async error.
	waitFor(t, c, isType(protocol.TypeError, a))

	// The other agent is unaffected.
	attach(t, c, b, "")
	prompt(t, c, b, "still here")
	waitFor(t, c, isType(protocol.TypeTurnEnd, b))

	// New work restores the crashed agent with a new epoch and a fresh sync.
	prompt(t, c, a, "back again")
	sync := waitFor(t, c, isType(protocol.TypeSync, a)).Msg.(*protocol.Sync)
	if sync.RuntimeEpoch == nil || *sync.RuntimeEpoch != 1 {
		t.Fatalf("sync after restore has epoch %v, want 1", sync.RuntimeEpoch)
	}
	waitFor(t, c, isType(protocol.TypeTurnEnd, a))
}

func isStatusChange(id string, rs protocol.RuntimeState) func(client.Event) bool {
	return func(e client.Event) bool {
		ev, ok := e.Msg.(*protocol.AgentStatusChanged)
		return ok && ev.AgentID == id && ev.RuntimeState == rs
	}
}

func TestIdleRuntimeIsReapedAndRestoredOnDemand(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Runtime.IdleTimeout = 300 * time.Millisecond })
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	waitFor(t, c, isStatusChange(id, protocol.RuntimeStopped))
	eventually(t, "reaped runtime process gone", func() bool { return len(runtimePIDs(t, id)) == 0 })

	// An active turn is never reaped, however long it runs.
	prompt(t, c, id, "sim: sleep 900\nsim: say done")
	sync := waitFor(t, c, isType(protocol.TypeSync, id)).Msg.(*protocol.Sync)
	if *sync.RuntimeEpoch != 1 {
		t.Fatalf("restored epoch = %d, want 1", *sync.RuntimeEpoch)
	}
	for _, e := range collectUntil(t, c, isType(protocol.TypeTurnEnd, id)) {
		if isStatusChange(id, protocol.RuntimeStopping)(e) {
			t.Fatalf("runtime reaped during an active turn")
		}
	}
	waitFor(t, c, isStatusChange(id, protocol.RuntimeStopped))
}

func TestTerminateDefersWhileActive(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")

	prompt(t, c, id, "sim: sleep 400\nsim: say finished")
	waitFor(t, c, isType(protocol.TypeTurnStart, id))
	var data protocol.AgentTerminateData
	if err := c.Call(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, &data); err != nil || !data.Deferred {
		t.Fatalf("terminate while active = %+v, %v; want deferred", data, err)
	}
	evs := collectUntil(t, c, isStatusChange(id, protocol.RuntimeStopped))
	if got := turnText(evs); got != "finished" {
		t.Fatalf("active work did not finish before stop: text %q", got)
	}
	eventually(t, "runtime gone", func() bool { return len(runtimePIDs(t, id)) == 0 })

	// Inactive (here: stopped) → immediate.
	if err := c.Call(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, &data); err != nil || data.Deferred {
		t.Fatalf("terminate while stopped = %+v, %v", data, err)
	}
}

func TestKillEscalatesThroughAHungRuntime(t *testing.T) {
	h := start(t, func(c *config.Config) {
		c.Kill.AbortGrace = 200 * time.Millisecond
		c.Kill.TermGrace = 200 * time.Millisecond
	})
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	prompt(t, c, id, "sim: say hanging\nsim: hang")
	waitFor(t, c, isType(protocol.TypeMessageDelta, id))
	pids := runtimePIDs(t, id)
	if len(pids) != 1 {
		t.Fatalf("runtime pids %v", pids)
	}
	// `hang` follows the text at once, but a hung runtime sends nothing
	// more to wait for: it is in place once the runtime ignores SIGTERM,
	// the last thing `sim: hang` does after it stopped heeding input and
	// abort (before that the abort would be honoured and the test would
	// prove nothing).
	eventually(t, "the runtime ignores SIGTERM", func() bool { return actortest.Ignores(pids[0], syscall.SIGTERM) })
	// abort is ignored, SIGTERM is ignored: only SIGKILL ends it. The
	// response comes once the process is gone.
	if _, err := c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: id}}); err != nil {
		t.Fatalf("agent.kill: %v", err)
	}
	if got := runtimePIDs(t, id); len(got) != 0 {
		t.Fatalf("runtime still alive after kill response: %v", got)
	}
	if !logContains(h, `"stage":"kill"`) && !logContains(h, "stage=kill") {
		t.Errorf("escalation never reached the kill stage; log:\n%s", h.log.String())
	}
	// The identity is kept: the agent can work again.
	prompt(t, c, id, "hello")
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))

	// force kills at once.
	if _, err := c.Request(ctx(t), &protocol.AgentKill{Header: protocol.Header{Type: protocol.TypeAgentKill, AgentID: id}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := runtimePIDs(t, id); len(got) != 0 {
		t.Fatalf("runtime alive after force kill: %v", got)
	}
}

func logContains(h *harness, s string) bool {
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	return strings.Contains(h.log.w.String(), s)
}

func TestRuntimeStartFailureKeepsIdentity(t *testing.T) {
	cfg := newConfig(t)
	cfg.Runtime.StartTimeout = 300 * time.Millisecond
	h := startWithRuntime(t, cfg, "/bin/sleep", []string{"30"}) // never says hello
	c := h.dial()
	_, err := c.Request(ctx(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: shortTemp(t)})
	if protocol.CodeOf(err) != protocol.CodeRuntimeStartFailed {
		t.Fatalf("create with a runtime that never starts: %v, want RUNTIME_START_FAILED", err)
	}
	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil || len(list.Agents) != 1 {
		t.Fatalf("identity not kept: %+v %v", list, err)
	}
	id := list.Agents[0].AgentID
	if list.Agents[0].RuntimeState != protocol.RuntimeFailed {
		t.Errorf("runtime_state = %q, want failed", list.Agents[0].RuntimeState)
	}
	// Retry is safe and fails the same way, without losing the identity.
	_, err = c.Request(ctx(t), &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}})
	if protocol.CodeOf(err) != protocol.CodeRuntimeStartFailed {
		t.Fatalf("attach retry: %v", err)
	}
	eventually(t, "timed-out runtime killed", func() bool { return len(runtimePIDs(t, id)) == 0 })
}

func TestSecondDaemonOnSameHomeFails(t *testing.T) {
	h := start(t, nil)
	cfg2 := *h.cfg
	cfg2.Store.LockTimeout = 300 * time.Millisecond
	began := time.Now()
	_, err := daemon.New(&cfg2, daemon.Options{RuntimePath: runtimeBin})
	if err == nil {
		t.Fatal("second daemon on the same home started")
	}
	if !strings.Contains(err.Error(), h.cfg.Home) {
		t.Errorf("error %q does not name the home %s", err, h.cfg.Home)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("second daemon took %s to fail", d)
	}
	// The first is unaffected.
	c := h.dial()
	if _, err := c.Request(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}); err != nil {
		t.Fatal(err)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	cfg := newConfig(t)
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // leaves a socket file nobody serves
	h := startWith(t, cfg)
	c := h.dial()
	if _, err := c.Request(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(cfg.SocketPath())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, %v; want 0600", fi.Mode(), err)
	}
}

func TestShutdownCommandStopsRuntimesAndDaemon(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, nil)
	if len(runtimePIDs(t, id)) != 1 {
		t.Fatal("no runtime after create")
	}
	if _, err := c.Request(ctx(t), &protocol.DaemonShutdown{Header: protocol.Header{Type: protocol.TypeDaemonShutdown}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.d.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not stop")
	}
	if got := runtimePIDs(t, id); len(got) != 0 {
		t.Fatalf("runtime left behind: %v", got)
	}
	if _, err := os.Stat(h.cfg.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	if _, err := os.Stat(h.cfg.DiscoveryPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("daemon.json left behind: %v", err)
	}
}

func TestAgentsAndTranscriptsSurviveRestart(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, func(a *protocol.AgentCreate) { a.Name = "durable" })
	attach(t, c, id, "")
	prompt(t, c, id, "remember me")
	waitFor(t, c, isType(protocol.TypeTurnEnd, id))
	h.d.Shutdown(false)

	h2 := startWith(t, h.cfg)
	c2 := h2.dial()
	var list protocol.AgentListData
	if err := c2.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Agents) != 1 || list.Agents[0].AgentID != id || list.Agents[0].RuntimeState != protocol.RuntimeStopped {
		t.Fatalf("after restart: %+v", list.Agents)
	}
	sync := attach(t, c2, id, "")
	if n := len(sync.LiveWindow.Messages); n < 2 {
		t.Fatalf("live window after restart has %d messages, want the earlier turn", n)
	}
}

// startWithRuntime runs a daemon whose runtime command is path args.
func startWithRuntime(t *testing.T, cfg *config.Config, path string, args []string) *harness {
	t.Helper()
	d, err := daemon.New(cfg, daemon.Options{Version: "test", RuntimePath: path, RuntimeArgs: args, Environ: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(true) })
	return &harness{t: t, cfg: cfg, d: d, log: &syncWriter{w: &bytes.Buffer{}}}
}

func TestGracefulShutdownLetsActiveTurnsFinish(t *testing.T) {
	h := start(t, nil)
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	prompt(t, c, id, "sim: sleep 500\nsim: say finished before exit")
	waitFor(t, c, isType(protocol.TypeTurnStart, id))
	if _, err := c.Request(ctx(t), &protocol.DaemonShutdown{Header: protocol.Header{Type: protocol.TypeDaemonShutdown}}); err != nil {
		t.Fatal(err)
	}
	// The attached client watches the turn end before the daemon goes.
	evs := collectUntil(t, c, isType(protocol.TypeTurnEnd, id))
	if got := turnText(evs); got != "finished before exit" {
		t.Fatalf("turn text = %q", got)
	}
	select {
	case <-h.d.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not stop after the turn")
	}
	if got := runtimePIDs(t, id); len(got) != 0 {
		t.Fatalf("runtime left behind: %v", got)
	}
}

func TestForcedShutdownDoesNotWait(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Shutdown.Timeout = 30 * time.Second })
	c := h.dial()
	id := h.create(c, nil)
	attach(t, c, id, "")
	prompt(t, c, id, "sim: hang")
	waitFor(t, c, isType(protocol.TypeTurnStart, id))
	if _, err := c.Request(ctx(t), &protocol.DaemonShutdown{Header: protocol.Header{Type: protocol.TypeDaemonShutdown}, Force: true}); err != nil {
		t.Fatal(err)
	}
	// A graceful shutdown would wait up to shutdown.timeout (30 s) for the
	// hung turn; a forced one kills it at once.
	select {
	case <-h.d.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("forced shutdown waited for the hung turn")
	}
	if got := runtimePIDs(t, id); len(got) != 0 {
		t.Fatalf("hung runtime left behind: %v", got)
	}
}
