//go:build linux

package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// The cluster scenario's passive phase: the first prompt to a passivated
// agent. An agent idle for the registry's grace period (30 s: its runtime
// stopped, nobody attached, nothing in flight) has no actor any more; the
// next command serves it again from its manifest, and its prompt starts
// its runtime. On three fresh nodes, agents are made on n3, their
// runtimes stopped and their connection closed; once n3's log says every
// one was passivated, each is woken once by a client of n3 (same node) or
// of n1 (cross node: n1 forwards the commands to n3 over a tunnel), half
// each, alternating: agent.attach sent → sync (the actor served again,
// and its runtime started: the attach starts it), then a prompt sent →
// acknowledged, → turn_start, → turn_end, and attach sent → turn_start
// in all.

// passiveWait bounds the wait for every agent's passivation.
const passiveWait = 3 * time.Minute

// passivePath is one path's figures.
type passivePath struct {
	Path    string `json:"path"` // same-node or cross-node
	Via     string `json:"via"`
	Host    string `json:"host"`
	Samples int    `json:"samples"`
	Attach  dist   `json:"attach_to_sync"`
	Ack     dist   `json:"prompt_ack"`
	First   dist   `json:"prompt_to_first_event"`
	TurnEnd dist   `json:"prompt_to_turn_end"`
	// Total: agent.attach sent → the turn's first event, the whole wake-up
	// of a passivated agent as its client sees it.
	Total dist `json:"attach_to_first_event"`
}

// passiveRun is the passive phase: samples wake-ups per path.
func passiveRun(o *options, samples int) ([]passivePath, error) {
	cl, err := startNodesOpts(o, 3, []string{"SHARD_LOG_LEVEL=debug"}, false)
	if err != nil {
		return nil, err
	}
	host := cl.nodes[2]
	// The agents, and one more per path to open each path untimed (n1's
	// upstream to n3, the connections' first attach).
	ids, err := passivatedAgents(host, 2*samples+2)
	if err != nil {
		return nil, err
	}
	paths := []passivePath{{Path: "same-node", Via: cl.names[2], Host: cl.names[2], Samples: samples},
		{Path: "cross-node", Via: cl.names[0], Host: cl.names[2], Samples: samples}}
	vias := []*daemon{cl.nodes[2], cl.nodes[0]}
	taps := make([]*eventTap, 2)
	for p, d := range vias {
		c, err := d.dial()
		if err != nil {
			return nil, err
		}
		taps[p] = newEventTap(c)
		if _, err := wakeOnce(taps[p], ids[2*samples+p]); err != nil {
			return nil, fmt.Errorf("%s: untimed wake-up: %w", paths[p].Path, err)
		}
	}
	var attach, ack, first, end, total [2][]time.Duration
	for s := range 2 * samples {
		p := s % 2
		w, err := wakeOnce(taps[p], ids[s])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", paths[p].Path, err)
		}
		attach[p] = append(attach[p], w.attach)
		ack[p] = append(ack[p], w.ack)
		first[p] = append(first[p], w.first)
		end[p] = append(end[p], w.end)
		total[p] = append(total[p], w.attach+w.first)
	}
	for p := range paths {
		paths[p].Attach, paths[p].Ack, paths[p].First = summarize(attach[p]), summarize(ack[p]), summarize(first[p])
		paths[p].TurnEnd, paths[p].Total = summarize(end[p]), summarize(total[p])
	}
	return paths, nil
}

// passivatedAgents makes n agents on d, stops their runtimes, closes the
// connection that made them, and waits until d's log says the registry
// passivated every one.
func passivatedAgents(d *daemon, n int) ([]string, error) {
	c, err := d.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	tap := newEventTap(c)
	ids := make([]string, n)
	for i := range ids {
		if ids[i], err = createAgent(c); err != nil {
			return nil, err
		}
		if err := call(c, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: ids[i]}}, nil); err != nil {
			return nil, fmt.Errorf("agent.attach: %w", err)
		}
		if err := call(c, &protocol.AgentTerminate{Header: protocol.Header{Type: protocol.TypeAgentTerminate, AgentID: ids[i]}}, nil); err != nil {
			return nil, fmt.Errorf("agent.terminate: %w", err)
		}
		for {
			st, err := runtimeState(c, ids[i])
			if err != nil {
				return nil, err
			}
			if st == protocol.RuntimeStopped {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := call(c, &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: ids[i]}}, nil); err != nil {
			return nil, fmt.Errorf("agent.detach: %w", err)
		}
		tap.flush()
	}
	c.Close()
	deadline := time.Now().Add(passiveWait)
	for {
		log, err := d.Log(0)
		if err != nil {
			return nil, err
		}
		left := 0
		for _, id := range ids {
			if !passivatedIn(log, id) {
				left++
			}
		}
		if left == 0 {
			return ids, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d agents not passivated within %s", left, n, passiveWait)
		}
		time.Sleep(time.Second)
	}
}

// passivatedIn reports whether a daemon's log says agent id was passivated.
func passivatedIn(log, id string) bool {
	for l := range strings.SplitSeq(log, "\n") {
		if strings.Contains(l, "registry: agent passivated") && strings.Contains(l, id) {
			return true
		}
	}
	return false
}

// wakeUp is one wake-up's times.
type wakeUp struct {
	attach, ack, first, end time.Duration
}

// wakeOnce attaches tap's connection to the passivated agent id, then
// prompts it, and times each step.
func wakeOnce(tap *eventTap, id string) (wakeUp, error) {
	var w wakeUp
	tap.flush()
	t0 := time.Now()
	if err := call(tap.c, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, nil); err != nil {
		return w, fmt.Errorf("agent.attach: %w", err)
	}
	at, err := tap.await(id, protocol.TypeSync)
	if err != nil {
		return w, err
	}
	w.attach = at.Sub(t0)
	t0 = time.Now()
	if err := prompt(tap.c, id, "sim: say hi"); err != nil {
		return w, fmt.Errorf("prompt: %w", err)
	}
	w.ack = time.Since(t0)
	first, err := tap.await(id, protocol.TypeTurnStart)
	if err != nil {
		return w, err
	}
	end, err := tap.await(id, protocol.TypeTurnEnd)
	if err != nil {
		return w, err
	}
	w.first, w.end = first.Sub(t0), end.Sub(t0)
	return w, nil
}

// passiveRows adds the passive phase's rows to rep and returns its
// comparison note.
func passiveRows(rep *report, ps []passivePath) []string {
	for _, p := range ps {
		name := fmt.Sprintf("%s (n3 via %s)", p.Path, p.Via)
		for _, r := range []struct {
			name string
			d    dist
		}{{"passivated: attach → sync", p.Attach}, {"passivated: prompt ack", p.Ack}, {"passivated: prompt → first event", p.First},
			{"passivated: prompt → turn_end", p.TurnEnd}, {"passivated: attach → first event", p.Total}} {
			rep.Rows = append(rep.Rows, []string{r.name + ": " + name, "3", fmt.Sprint(r.d.N), "", f2(r.d.P50), f2(r.d.P99), f2(r.d.Max), ""})
		}
	}
	if len(ps) != 2 {
		return nil
	}
	same, cross := ps[0], ps[1]
	return []string{fmt.Sprintf("passivated, cross-node against same-node: attach → sync p50 +%s ms, prompt → first event p50 +%s ms, attach → first event p50 %s× (+%s ms)",
		f2(cross.Attach.P50-same.Attach.P50), f2(cross.First.P50-same.First.P50), f2(cross.Total.P50/same.Total.P50), f2(cross.Total.P50-same.Total.P50))}
}

// passiveNote says what the passive phase did, with perPath samples.
func passiveNote(perPath int) string {
	return fmt.Sprintf("passive: on three fresh nodes, %d agents made on n3, their runtimes stopped (agent.terminate), detached, their connection closed; once n3's log says the registry passivated each (30 s idle: its actor gone), each is woken once through a client of n3 (same node) or of n1 (cross node), alternating, %d per path after one untimed wake-up each: agent.attach sent → sync (the actor served again from its manifest, its runtime started), then `sim: say hi` sent → acknowledged, → turn_start, → turn_end; attach → first event is the whole wake-up", 2*perPath+2, perPath)
}
