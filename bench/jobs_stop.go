//go:build linux

package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// stopPhase is the stop measurement of the jobs scenario.
type stopPhase struct {
	Streams int     `json:"streams"`
	Seconds float64 `json:"seconds"`
	// Ack is subagent.stop sent → its response; Cancelled is subagent.stop
	// sent → the parent's connection receives the run's
	// subagent_run_changed to cancelled (the child's turn aborted, the
	// lease ended and the transition committed).
	Ack          dist    `json:"ack_latency"`
	Cancelled    dist    `json:"cancelled_latency"`
	Commits      int     `json:"commits"`
	CommitMeanMs float64 `json:"commit_mean_ms"`
	CPU          cpuUse  `json:"cpu"`
}

const stopStreams = 4

// stopPhaseRun measures subagent.stop of a run that is executing.
// --stop-samples samples (default 100, quick 16) run in stopStreams
// concurrent streams on one daemon, each a parent agent with its own
// connection. A sample creates a one-task job whose child sleeps
// ("sim: sleep 60000"), waits for the parent's connection to receive the
// run's subagent_run_changed to active, then stops the job and times the
// stop's response and the run's change to cancelled. The stop's first
// stage is an abort of the child's turn, which the sim runtime honours at
// once, so the figure is the daemon's path: the lease, the commits, the
// events.
func stopPhaseRun(o *options) (stopPhase, error) {
	samples := pick(o.stopSamples, 100, 16, o.quick)
	d, err := startDaemon(o, nil, jobsDaemonArgs(o)...)
	if err != nil {
		return stopPhase{}, err
	}
	ctl, err := d.dial()
	if err != nil {
		return stopPhase{}, err
	}
	drain(ctl)
	type stream struct {
		parent  string
		pc      *client.Conn
		changes chan runChange
	}
	streams := make([]*stream, stopStreams)
	for i := range streams {
		s := &stream{changes: make(chan runChange, 64)}
		if s.parent, err = createAgent(ctl); err != nil {
			return stopPhase{}, err
		}
		if s.pc, err = d.dial(); err != nil {
			return stopPhase{}, err
		}
		go watchRunChanges(s.pc, s.changes)
		streams[i] = s
	}
	before := d.commitStats()
	var (
		mu            sync.Mutex
		acks, cancels []time.Duration
		wg            sync.WaitGroup
	)
	errs := make([]error, len(streams))
	start := time.Now()
	for i, s := range streams {
		n := samples / len(streams)
		if i < samples%len(streams) {
			n++
		}
		wg.Go(func() {
			for j := range n {
				ack, cancelled, err := stopSample(s.pc, s.changes, s.parent, j)
				if err != nil {
					errs[i] = fmt.Errorf("stream %d sample %d: %w", i, j, err)
					return
				}
				mu.Lock()
				acks, cancels = append(acks, ack), append(cancels, cancelled)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return stopPhase{}, err
		}
	}
	after := d.commitStats()
	p := stopPhase{Streams: len(streams), Seconds: wall.Seconds(), Ack: summarize(acks), Cancelled: summarize(cancels)}
	p.Commits, p.CommitMeanMs, p.CPU = after.since(before)
	return p, nil
}

// runChange is a subagent_run_changed as the driver received it.
type runChange struct {
	runID string
	state protocol.RunState
	at    time.Time
}

// watchRunChanges timestamps every subagent_run_changed c receives.
func watchRunChanges(c *client.Conn, out chan<- runChange) {
	for ev := range c.Events() {
		if rc, ok := ev.Msg.(*protocol.SubagentRunChanged); ok {
			out <- runChange{runID: rc.RunID, state: rc.State, at: time.Now()}
		}
	}
}

// awaitRun waits for run's change to state on changes.
func awaitRun(changes <-chan runChange, run string, state protocol.RunState) (time.Time, error) {
	timeout := time.After(reqTimeout)
	for {
		select {
		case c := <-changes:
			if c.runID == run && c.state == state {
				return c.at, nil
			}
		case <-timeout:
			return time.Time{}, fmt.Errorf("run %s not %s within %s", run, state, reqTimeout)
		}
	}
}

// stopSample runs one sample: the stop's ack and its run's cancellation,
// each from the stop sent.
func stopSample(pc *client.Conn, changes <-chan runChange, parent string, j int) (ack, cancelled time.Duration, err error) {
	var created protocol.SubagentCreateData
	if err := call(pc, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
		ParentAgentID: parent, Name: fmt.Sprintf("s%d", j), Task: "sim: sleep 60000"}, &created); err != nil {
		return 0, 0, fmt.Errorf("subagent.create: %w", err)
	}
	run := created.Runs[0].RunID
	if _, err := awaitRun(changes, run, protocol.RunActive); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	var data protocol.SubagentStopData
	if err := call(pc, &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop},
		ParentAgentID: parent, Handle: created.JobID}, &data); err != nil {
		return 0, 0, fmt.Errorf("subagent.stop: %w", err)
	}
	ack = time.Since(t0)
	at, err := awaitRun(changes, run, protocol.RunCancelled)
	if err != nil {
		return 0, 0, err
	}
	return ack, at.Sub(t0), nil
}
