//go:build linux

package main

import (
	"fmt"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

type resyncPhase struct {
	Window      int     `json:"window_target"`
	Messages    int     `json:"window_messages"`
	SyncBytes   int     `json:"sync_bytes"`
	Samples     int     `json:"samples"`
	Latency     dist    `json:"attach_to_sync"`
	BuildSecond float64 `json:"build_seconds"`
}

// runResync: one agent whose live window is grown, by tiny prompts (each
// adds a user and an assistant message), to each size of --windows in
// turn; at each size a separate connection attaches, waits for the sync
// and detaches, --samples times. Compaction is off so the window keeps
// every message.
func runResync(o *options) (*report, error) {
	def := []int{10, 1000}
	if o.quick {
		def = []int{10, 100}
	}
	ws, err := ints(o.windows, def)
	if err != nil {
		return nil, err
	}
	samples := pick(o.samples, 200, 50, o.quick)
	d, err := startDaemon(o, floodEnv)
	if err != nil {
		return nil, err
	}
	ctl, err := d.dial()
	if err != nil {
		return nil, err
	}
	id, err := createAgent(ctl)
	if err != nil {
		return nil, err
	}
	sy, _, err := attachSync(ctl, id)
	if err != nil {
		return nil, err
	}
	have := len(sy.LiveWindow.Messages)
	m, err := d.dial()
	if err != nil {
		return nil, err
	}
	var phases []resyncPhase
	for _, w := range ws {
		t0 := time.Now()
		for i := 0; have < w; i++ {
			if err := promptAndWait(ctl, id, fmt.Sprintf("ping %d", i)); err != nil {
				return nil, fmt.Errorf("building window %d: %w", w, err)
			}
			have += 2
			// m is not attached, but orchestrator broadcasts (agent
			// status) reach every connection: read them, or thousands of
			// prompts get m dropped as a slow consumer.
			drainQueued(m)
		}
		build := time.Since(t0)
		var lat []time.Duration
		var last *protocol.Sync
		var size int
		for range samples {
			t := time.Now()
			s, n, err := attachSync(m, id)
			if err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(t))
			last, size = s, n
			if err := call(m, &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: id}}, nil); err != nil {
				return nil, fmt.Errorf("agent.detach: %w", err)
			}
		}
		have = len(last.LiveWindow.Messages)
		phases = append(phases, resyncPhase{Window: w, Messages: have, SyncBytes: size, Samples: samples,
			Latency: summarize(lat), BuildSecond: build.Seconds()})
	}
	rep := &report{Header: []string{"window", "messages", "sync bytes", "samples", "p50 ms", "p99 ms", "max ms", "build s"}, Results: phases}
	for _, p := range phases {
		rep.Rows = append(rep.Rows, []string{fmt.Sprint(p.Window), fmt.Sprint(p.Messages), fmt.Sprint(p.SyncBytes), fmt.Sprint(p.Samples),
			f2(p.Latency.P50), f2(p.Latency.P99), f2(p.Latency.Max), f3(p.BuildSecond)})
	}
	rep.Notes = append(rep.Notes, "latency: agent.attach sent → sync received on an already connected unix-socket client; detach between samples")
	return rep, nil
}

// promptAndWait prompts agent id over c (attached, events read only here)
// and waits for the turn's end.
func promptAndWait(c *client.Conn, id, msg string) error {
	if err := prompt(c, id, msg); err != nil {
		return err
	}
	timeout := time.After(reqTimeout)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				return fmt.Errorf("connection ended: %v", c.Err())
			}
			if te, ok := ev.Msg.(*protocol.TurnEnd); ok && te.AgentID == id {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no turn_end within %s", reqTimeout)
		}
	}
}

// drainQueued discards the events c has already received, without waiting.
func drainQueued(c *client.Conn) {
	for {
		select {
		case _, ok := <-c.Events():
			if !ok {
				return
			}
		default:
			return
		}
	}
}
