package daemon_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/protocol"
)

// An agent that went idle (runtime stopped, nobody attached) is set aside
// after the grace period and served again, over the wire, as if it had
// never been: the same projection, the same counts, its session restored
// on the next attach with a runtime_epoch that keeps increasing; commands
// that race the passivation are all answered.
func TestIdleAgentIsPassivatedAndServedAgain(t *testing.T) {
	clk := clock.NewManual(time.Now())
	h := startOpts(t, newConfig(t), func(o *daemon.Options) { o.RegistryClock = clk })
	c := h.dial()
	id := h.create(c, nil)
	if s := attach(t, c, id, ""); s.RuntimeEpoch == nil || *s.RuntimeEpoch != 0 {
		t.Fatalf("first sync epoch = %v, want 0", s.RuntimeEpoch)
	}
	if got := turnText(runTurn(t, c, id, "sim: say hello")); got != "hello" {
		t.Fatalf("turn text = %q", got)
	}
	idle := func() {
		t.Helper()
		if err := c.Call(ctx(t), &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: id}}, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, isStatusChange(id, protocol.RuntimeStopped))
		if err := c.Call(ctx(t), &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: id}}, nil); err != nil {
			t.Fatal(err)
		}
		// The grace period starts once the registry heard the agent is
		// idle: at the latest when it handled the detach.
		wctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := clk.WaitPending(wctx, 1); err != nil {
			t.Fatal("no grace period started")
		}
	}
	status := func() json.RawMessage {
		t.Helper()
		resp, err := c.Request(ctx(t), &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Data
	}
	idle()
	before := status()
	clk.Advance(registry.DefaultPassivateAfter)
	eventually(t, "agent passivated", func() bool { return logContains(h, "registry: agent passivated") })
	if after := status(); string(after) != string(before) {
		t.Fatalf("agent.status after passivation = %s, want %s", after, before)
	}
	var st protocol.DaemonStatusData
	if err := c.Call(ctx(t), &protocol.DaemonStatus{Header: protocol.Header{Type: protocol.TypeDaemonStatus}}, &st); err != nil ||
		st.AgentsByRuntimeState[protocol.RuntimeStopped] != 1 || st.AgentsByStatus[protocol.StatusIdle] != 1 {
		t.Fatalf("daemon.status = %+v, %v; want the agent idle and stopped", st, err)
	}

	// Served again: its session is restored, the epoch goes on.
	if s := attach(t, c, id, ""); s.RuntimeEpoch == nil || *s.RuntimeEpoch != 1 {
		t.Fatalf("sync epoch after passivation = %v, want 1", s.RuntimeEpoch)
	}
	if got := turnText(runTurn(t, c, id, "sim: say again")); got != "again" {
		t.Fatalf("turn text after passivation = %q", got)
	}

	// Commands sent as the grace period ends are answered, in order.
	idle()
	clk.Advance(registry.DefaultPassivateAfter)
	var reqs []<-chan error
	for range 5 {
		ch := make(chan error, 1)
		reqs = append(reqs, ch)
		go func(ch chan<- error) {
			ch <- c.Call(ctx(t), &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: id}}, nil)
		}(ch)
	}
	for _, ch := range reqs {
		if err := <-ch; err != nil {
			t.Fatalf("agent.detach racing the passivation: %v", err)
		}
	}
	var data protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &data); err != nil || len(data.Agents) != 1 || data.Agents[0].AgentID != id {
		t.Fatalf("agent.list = %+v, %v", data.Agents, err)
	}
}
