package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// coordHarness runs a coordinator on a real store, with a registry that
// swallows everything (runs are admitted and move to starting, and stay
// there) and one client connection whose records land in an outbox.
type coordHarness struct {
	t        *testing.T
	sys      *actor.ActorSystem
	coord    *actor.PID
	registry *actor.PID // the registry's stand-in
	client   *agent.Client
	out      *outbox.Outbox
	got      map[string]protocol.Response // responses by command id
	group    *xsync.Group                 // the coordinator's goroutines
}

func startCoordinator(t *testing.T, st *store.Store) *coordHarness {
	t.Helper()
	nop := actor.PropsFromFunc(func(actor.Context) {})
	return startCoordinatorWith(t, st, nop, nil, Limits{})
}

// startCoordinatorWith is startCoordinator with the registry's props (a
// probe that plays the registry), a clock (nil: the wall clock) and limits.
// The coordinator's goroutine group is closed at cleanup, after the actors
// stopped, as the daemon does.
func startCoordinatorWith(t *testing.T, st *store.Store, reg *actor.Props, clk clock.Clock, lim Limits) *coordHarness {
	t.Helper()
	return startCoordinatorDeps(t, st, reg, clk, lim, nil)
}

// startCoordinatorDeps is startCoordinatorWith with a hook on the Deps.
func startCoordinatorDeps(t *testing.T, st *store.Store, reg *actor.Props, clk clock.Clock, lim Limits, mutate func(*Deps)) *coordHarness {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard }),
		// Messages to actors stopped at cleanup are dead letters; their
		// throttle's goroutine must not outlive the test by long.
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	nop := actor.PropsFromFunc(func(actor.Context) {})
	registry := sys.Root.Spawn(reg)
	conn := sys.Root.Spawn(nop)
	group := &xsync.Group{}
	deps := Deps{Store: st, Registry: registry, Logger: discard, Clock: clk, Group: group, Limits: lim}
	if mutate != nil {
		mutate(&deps)
	}
	coord := sys.Root.Spawn(Props(deps))
	h := &coordHarness{t: t, sys: sys, coord: coord, registry: registry, out: outbox.New(outbox.Limits{}), got: map[string]protocol.Response{}, group: group}
	h.client = &agent.Client{ID: 1, PID: conn, Out: h.out, Source: "unix"}
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(coord).Wait()
		_ = sys.Root.StopFuture(registry).Wait()
		_ = sys.Root.StopFuture(conn).Wait()
		sys.Shutdown()
		group.Close()
	})
	return h
}

// send sends cmd with id to the coordinator as the registry forwards it; it
// does not wait.
func (h *coordHarness) send(id, typ string, cmd protocol.Command) {
	h.sys.Root.Send(h.coord, &registry.Command{Client: h.client, Header: protocol.Header{Type: typ, ID: id}, Cmd: cmd})
}

// create sends a subagent.create with id; it does not wait.
func (h *coordHarness) create(id string, m *protocol.SubagentCreate) {
	m.Header = protocol.Header{Type: protocol.TypeSubagentCreate, ID: id}
	h.sys.Root.Send(h.coord, &registry.Command{Client: h.client, Header: m.Header, Cmd: m})
}

// responses reads the outbox until the responses to every id arrived.
func (h *coordHarness) responses(ids ...string) map[string]protocol.Response {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	missing := func() int {
		n := 0
		for _, id := range ids {
			if _, ok := h.got[id]; !ok {
				n++
			}
		}
		return n
	}
	for missing() > 0 {
		recs, ok := h.out.Next(ctx)
		if !ok {
			h.t.Fatalf("%d responses missing", missing())
		}
		for _, rec := range recs {
			var head struct{ Type string }
			if err := json.Unmarshal(rec, &head); err != nil {
				h.t.Fatal(err)
			}
			if head.Type != protocol.TypeResponse {
				continue // an event (subagent_run_changed)
			}
			var r protocol.Response
			if err := json.Unmarshal(rec, &r); err != nil {
				h.t.Fatal(err)
			}
			h.got[r.ID] = r
		}
	}
	return h.got
}

func createdOf(t *testing.T, r protocol.Response) protocol.SubagentCreateData {
	t.Helper()
	if !r.Success {
		t.Fatalf("response %s failed: %+v", r.ID, r.Error)
	}
	var d protocol.SubagentCreateData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func openStoreAt(t *testing.T, path string, opts store.Options) *store.Store {
	t.Helper()
	opts.NoSync = true
	st, err := store.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func putParent(t *testing.T, st *store.Store, id string) {
	t.Helper()
	if err := st.CreateAgent(store.Agent{AgentID: id, SessionID: "sess-" + id, Cwd: "/w"}); err != nil {
		t.Fatal(err)
	}
}

// Many creates in flight at once (group-committed together) are all
// acknowledged, each child gets an alias no other child of its parent
// has, and everything acknowledged is in the store after a reopen.
func TestConcurrentCreatesAcknowledgedAndDurable(t *testing.T) {
	const perParent = 40
	parents := []string{"agent-p1", "agent-p2"}
	path := filepath.Join(t.TempDir(), "shard.db")
	st := openStoreAt(t, path, store.Options{})
	for _, p := range parents {
		putParent(t, st, p)
	}
	h := startCoordinator(t, st)
	var ids []string
	for i := range perParent {
		for _, p := range parents {
			id := fmt.Sprintf("%s-%d", p, i)
			ids = append(ids, id)
			h.create(id, &protocol.SubagentCreate{ParentAgentID: p, Strategy: protocol.StrategyParallel,
				Tasks: []protocol.TaskSpec{{Name: "a", Task: taskMarker}, {Name: "b", Task: taskMarker}}})
		}
	}
	got := h.responses(ids...)
	type child struct{ parent, agentID, alias string }
	var children []child
	aliases := map[string]bool{}
	jobIDs := map[string]bool{}
	for _, id := range ids {
		d := createdOf(t, got[id])
		jobIDs[d.JobID] = true
		parent := id[:len("agent-p1")]
		for _, r := range d.Runs {
			key := parent + "/" + view.NormalizeAlias(r.Alias)
			if aliases[key] {
				t.Fatalf("alias %s given twice", key)
			}
			aliases[key] = true
			children = append(children, child{parent, r.AgentID, r.Alias})
		}
	}
	if len(jobIDs) != len(ids) {
		t.Fatalf("%d distinct jobs for %d creates", len(jobIDs), len(ids))
	}
	_ = h.sys.Root.StopFuture(h.coord).Wait()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStoreAt(t, path, store.Options{})
	defer st.Close()
	all, err := st.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(ids) {
		t.Fatalf("%d jobs stored, want %d", len(all), len(ids))
	}
	for _, j := range all {
		if !jobIDs[j.JobID] {
			t.Fatalf("stored job %s was never acknowledged", j.JobID)
		}
	}
	for _, c := range children {
		if _, err := st.GetAgent(c.agentID); err != nil {
			t.Fatalf("child %s: %v", c.agentID, err)
		}
		if id, ok, err := st.Alias(c.parent, view.NormalizeAlias(c.alias)); err != nil || !ok || id != c.agentID {
			t.Fatalf("alias %s of %s = %q %v %v, want %s", c.alias, c.parent, id, ok, err, c.agentID)
		}
	}
	if err := st.Check(); err != nil {
		t.Fatal(err)
	}
}

// When the commit fails, every create in it is answered with an error and
// none is stored; the aliases they had picked are free again.
func TestCreateCommitFailureAnswersEveryCreate(t *testing.T) {
	const n = 20
	path := filepath.Join(t.TempDir(), "shard.db")
	var failing atomic.Bool
	injected := errors.New("injected commit failure")
	st := openStoreAt(t, path, store.Options{BeforeCommit: func(int) error {
		if failing.Load() {
			return injected
		}
		return nil
	}})
	putParent(t, st, "agent-p")
	h := startCoordinator(t, st)
	failing.Store(true)
	var ids []string
	for i := range n {
		id := fmt.Sprint("c", i)
		ids = append(ids, id)
		h.create(id, &protocol.SubagentCreate{ParentAgentID: "agent-p", Name: "t", Task: taskMarker})
	}
	got := h.responses(ids...)
	for _, id := range ids {
		r := got[id]
		if r.Success || r.Error == nil || r.Error.Code != protocol.CodeInternal {
			t.Fatalf("create %s during commit failures: %+v", id, r)
		}
	}
	if all, err := st.Jobs(); err != nil || len(all) != 0 {
		t.Fatalf("stored after failed commits: %d jobs, %v", len(all), err)
	}
	if agents, err := st.ListAgents(); err != nil || len(agents) != 1 {
		t.Fatalf("stored agents after failed commits: %+v, %v", agents, err)
	}
	failing.Store(false)
	h.create("after", &protocol.SubagentCreate{ParentAgentID: "agent-p", Name: "t", Task: taskMarker})
	d := createdOf(t, h.responses("after")["after"])
	if want := view.DefaultAliases()[0]; d.Runs[0].Alias != want {
		t.Fatalf("alias after the failures = %q, want %q (released)", d.Runs[0].Alias, want)
	}
	_ = h.sys.Root.StopFuture(h.coord).Wait()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStoreAt(t, path, store.Options{})
	defer st.Close()
	if all, err := st.Jobs(); err != nil || len(all) != 1 || all[0].JobID != d.JobID {
		t.Fatalf("after reopen: %+v, %v; want only %s", all, err, d.JobID)
	}
}

// Repeats of a request id sent while its first create is still committing
// get the same job; one job is stored.
func TestCreateRepeatedRequestIDInFlight(t *testing.T) {
	st := openStoreAt(t, filepath.Join(t.TempDir(), "shard.db"), store.Options{})
	defer st.Close()
	putParent(t, st, "agent-p")
	h := startCoordinator(t, st)
	var ids []string
	for i := range 5 {
		id := fmt.Sprint("r", i)
		ids = append(ids, id)
		h.create(id, &protocol.SubagentCreate{ParentAgentID: "agent-p", RequestID: "req-1", Name: "t", Task: taskMarker})
	}
	got := h.responses(ids...)
	job := ""
	for _, id := range ids {
		d := createdOf(t, got[id])
		if job == "" {
			job = d.JobID
		}
		if d.JobID != job {
			t.Fatalf("request id answered with jobs %s and %s", job, d.JobID)
		}
	}
	_ = h.sys.Root.StopFuture(h.coord).Wait()
	if all, err := st.Jobs(); err != nil || len(all) != 1 {
		t.Fatalf("stored %d jobs, %v; want 1", len(all), err)
	}
}

// createMarker is what TestChildIsAdoptedBeforeTheAck's outbox observer
// sends the registry when a create's response is pushed.
type createMarker struct{}

// TestChildIsAdoptedBeforeTheAck: the registry is told to serve a
// create's children before the create's response reaches the client's
// outbox, so an agent.attach sent on reading the ack (which reaches the
// registry after the response was pushed) finds the child. The outbox
// observer runs on the pushing goroutine, in reply: the marker it sends
// the registry is queued at the exact moment the response is, so the order
// the registry sees is the order of the two sends.
func TestChildIsAdoptedBeforeTheAck(t *testing.T) {
	st := openStoreAt(t, filepath.Join(t.TempDir(), "shard.db"), store.Options{})
	putParent(t, st, "agent-p1")
	order := make(chan string, 64)
	reg := actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *registry.Adopt:
			order <- "adopt"
		case createMarker:
			order <- "response"
		}
	})
	h := startCoordinatorWith(t, st, reg, nil, Limits{})
	h.out.SetObserver(func(rec []byte) {
		if bytes.Contains(rec, []byte(`"type":"response"`)) {
			h.sys.Root.Send(h.registry, createMarker{})
		}
	})
	const n = 5
	for i := range n {
		id := fmt.Sprint("c", i)
		h.create(id, &protocol.SubagentCreate{ParentAgentID: "agent-p1", Name: "a", Task: taskMarker})
		h.responses(id)
		for _, want := range []string{"adopt", "response"} {
			select {
			case got := <-order:
				if got != want {
					t.Fatalf("create %d: the registry saw the %s first; want the children adopted before the response is pushed", i, got)
				}
			case <-time.After(30 * time.Second): // a hang guard
				t.Fatalf("create %d: the registry never saw the %s", i, want)
			}
		}
	}
}
