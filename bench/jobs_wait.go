//go:build linux

package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// waitPhase is the wait wake-up measurement of the jobs scenario.
type waitPhase struct {
	Streams int `json:"streams"`
	SleepMs int `json:"sleep_ms"`
	// Late counts samples dropped because the wait was sent after the
	// run's turn had already ended.
	Late         int     `json:"late"`
	Seconds      float64 `json:"seconds"`
	Latency      dist    `json:"wake_latency"`
	Commits      int     `json:"commits"`
	CommitMeanMs float64 `json:"commit_mean_ms"`
	CPU          cpuUse  `json:"cpu"`
}

const (
	waitStreams = 8
	waitSleepMs = 300
)

// waitPhaseRun measures how soon a pending subagent.wait answers after its
// run ended. --wait-samples samples (default 100, quick 24) run in
// waitStreams concurrent streams on one daemon. Each stream has a parent
// agent with its own connection and an observer connection; a sample
// creates a one-task job ("sim: sleep waitSleepMs"), attaches the observer
// to the child agent, sends subagent.wait for the run, and takes the time
// from the observer receiving the child's turn_end (the run's turn ended:
// the child agent reports the end of its lease in the same step) to the
// wait response arriving.
func waitPhaseRun(o *options) (waitPhase, error) {
	samples := pick(o.waitSamples, 100, 24, o.quick)
	d, err := startDaemon(o, nil, jobsDaemonArgs(o)...)
	if err != nil {
		return waitPhase{}, err
	}
	ctl, err := d.dial()
	if err != nil {
		return waitPhase{}, err
	}
	drain(ctl)
	type stream struct {
		parent string
		pc     *client.Conn
		obs    *client.Conn
		ends   chan turnEnded
	}
	streams := make([]*stream, waitStreams)
	for i := range streams {
		s := &stream{ends: make(chan turnEnded, 64)}
		if s.parent, err = createAgent(ctl); err != nil {
			return waitPhase{}, err
		}
		if s.pc, err = d.dial(); err != nil {
			return waitPhase{}, err
		}
		drain(s.pc)
		if s.obs, err = d.dial(); err != nil {
			return waitPhase{}, err
		}
		go watchTurnEnds(s.obs, s.ends)
		streams[i] = s
	}
	before := d.commitStats()
	var (
		mu   sync.Mutex
		lat  []time.Duration
		late int
		wg   sync.WaitGroup
	)
	errs := make([]error, len(streams))
	start := time.Now()
	for i, s := range streams {
		n := samples / len(streams)
		if i < samples%len(streams) {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range n {
				l, ok, err := waitSample(s.pc, s.obs, s.ends, s.parent, j)
				if err != nil {
					errs[i] = fmt.Errorf("stream %d sample %d: %w", i, j, err)
					return
				}
				mu.Lock()
				if ok {
					lat = append(lat, l)
				} else {
					late++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return waitPhase{}, err
		}
	}
	after := d.commitStats()
	w := waitPhase{Streams: len(streams), SleepMs: waitSleepMs, Late: late, Seconds: wall.Seconds(), Latency: summarize(lat)}
	w.Commits, w.CommitMeanMs, w.CPU = after.since(before)
	return w, nil
}

type turnEnded struct {
	agentID string
	at      time.Time
}

// watchTurnEnds timestamps every turn_end c receives.
func watchTurnEnds(c *client.Conn, out chan<- turnEnded) {
	for ev := range c.Events() {
		if te, ok := ev.Msg.(*protocol.TurnEnd); ok {
			out <- turnEnded{agentID: te.AgentID, at: time.Now()}
		}
	}
}

// waitSample runs one sample; ok is false when the wait was sent too late
// to be pending when the run ended.
func waitSample(pc, obs *client.Conn, ends chan turnEnded, parent string, j int) (time.Duration, bool, error) {
	var created protocol.SubagentCreateData
	if err := call(pc, &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
		ParentAgentID: parent, Name: fmt.Sprintf("w%d", j), Task: fmt.Sprintf("sim: sleep %d", waitSleepMs)}, &created); err != nil {
		return 0, false, fmt.Errorf("subagent.create: %w", err)
	}
	run := created.Runs[0]
	if err := call(obs, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: run.AgentID},
		Role: protocol.RoleObserver}, nil); err != nil {
		return 0, false, fmt.Errorf("agent.attach: %w", err)
	}
	type answer struct {
		sent, at time.Time
		data     protocol.SubagentWaitData
		err      error
	}
	answered := make(chan answer, 1)
	go func() {
		a := answer{sent: time.Now()}
		a.err = call(pc, &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait},
			ParentAgentID: parent, Handles: []string{run.RunID}}, &a.data)
		a.at = time.Now()
		answered <- a
	}()
	var ended time.Time
	timeout := time.After(reqTimeout)
	for ended.IsZero() {
		select {
		case e := <-ends:
			if e.agentID == run.AgentID {
				ended = e.at
			}
		case <-timeout:
			return 0, false, fmt.Errorf("no turn_end of %s within %s", run.AgentID, reqTimeout)
		}
	}
	a := <-answered
	if a.err != nil {
		return 0, false, fmt.Errorf("subagent.wait: %w", a.err)
	}
	if a.data.TimedOut || len(a.data.Runs) != 1 || !a.data.Runs[0].State.Terminal() {
		return 0, false, fmt.Errorf("subagent.wait answered %+v", a.data)
	}
	if err := call(obs, &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: run.AgentID}}, nil); err != nil {
		return 0, false, fmt.Errorf("agent.detach: %w", err)
	}
	if !a.sent.Before(ended) {
		return 0, false, nil
	}
	return a.at.Sub(ended), true, nil
}
