//go:build linux

package main

import (
	"fmt"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/refagent"
)

// The cluster scenario's attach phase: one agent on n3 of a three-node
// cluster, attached and streamed through n3 itself (same node) and through
// n1 (cross node: n1's gateway forwards the connection's commands for the
// agent to n3 over a tunnel, and n3's events back), one path after the
// other, each measured the same way by the same client library.

// attachPath is one path's figures.
type attachPath struct {
	Path string `json:"path"` // same-node or cross-node
	Via  string `json:"via"`  // the node whose socket the client uses
	Host string `json:"host"` // the node that hosts the agent
	// Attach: a fresh connection's agent.attach sent → its sync received.
	Attach dist `json:"attach_to_sync"`
	// Reattach: on a connection that attached before (through n1: whose
	// upstream to n3 is open), agent.detach, then agent.attach sent →
	// sync received.
	Reattach dist `json:"reattach_to_sync"`
	// ReattachFull is Reattach once the agent's live window holds the two
	// floods; FullSyncBytes is the size of that sync record.
	ReattachFull  dist `json:"reattach_full_window_to_sync"`
	FullSyncBytes int  `json:"full_window_sync_bytes"`
	// First: on an attached connection, a prompt sent → the turn's first
	// message_delta received.
	First   dist        `json:"prompt_to_first_delta"`
	Paced   streamStats `json:"paced"`
	Unpaced streamStats `json:"unpaced"`
}

// streamStats is one stamped flood received on one attached connection.
type streamStats struct {
	Deltas int `json:"deltas"`
	Bytes  int `json:"bytes"`
	Rate   int `json:"rate"` // deltas/s the runtime paced at; 0 unpaced
	// Seconds is the first delta received → the last.
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_s"`
	MBPerSec     float64 `json:"mb_per_s"`
	// Latency per delta: received − the runtime's stamp (one clock).
	Latency dist `json:"latency"`
}

// received is an event and when the driver read it.
type received struct {
	ev client.Event
	at time.Time
}

// streamTap reads every event of a connection into a deep buffer, with
// its arrival time.
type streamTap struct {
	c    *client.Conn
	evs  chan received
	dead chan struct{}
}

func newStreamTap(c *client.Conn) *streamTap {
	s := &streamTap{c: c, evs: make(chan received, 1<<16), dead: make(chan struct{})}
	go func() {
		defer close(s.dead)
		for ev := range c.Events() {
			s.evs <- received{ev: ev, at: time.Now()}
		}
	}()
	return s
}

// next returns the next event of agent id that want accepts.
func (s *streamTap) next(id string, want func(protocol.Typed) bool) (received, error) {
	timeout := time.After(reqTimeout)
	for {
		select {
		case r := <-s.evs:
			if r.ev.Msg.Head().AgentID == id && want(r.ev.Msg) {
				return r, nil
			}
		case <-s.dead:
			return received{}, fmt.Errorf("connection ended: %v", s.c.Err())
		case <-timeout:
			return received{}, fmt.Errorf("no awaited event of %s within %s", id, reqTimeout)
		}
	}
}

func isType(typ string) func(protocol.Typed) bool {
	return func(m protocol.Typed) bool { return m.Head().Type == typ }
}

func isTextDelta(m protocol.Typed) bool {
	d, ok := m.(*protocol.MessageDelta)
	return ok && d.Kind == protocol.DeltaText
}

// attachSamples measures n attaches of fresh connections to d: attach
// sent → sync received.
func attachSamples(d *daemon, id string, n int) (dist, error) {
	var lats []time.Duration
	for range n {
		c, err := d.dial()
		if err != nil {
			return dist{}, err
		}
		tap := newStreamTap(c)
		t0 := time.Now()
		if err := call(c, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, nil); err != nil {
			c.Close()
			return dist{}, fmt.Errorf("agent.attach: %w", err)
		}
		r, err := tap.next(id, isType(protocol.TypeSync))
		c.Close()
		if err != nil {
			return dist{}, err
		}
		lats = append(lats, r.at.Sub(t0))
	}
	return summarize(lats), nil
}

// reattachSamples detaches tap's connection from id and attaches it
// again, n times: attach sent → sync received.
func reattachSamples(tap *streamTap, id string, n int) (dist, error) {
	d, _, err := reattachSyncs(tap, id, n)
	return d, err
}

// reattachSyncs is reattachSamples, also returning the last sync's size.
func reattachSyncs(tap *streamTap, id string, n int) (dist, int, error) {
	var lats []time.Duration
	size := 0
	for range n {
		if err := call(tap.c, &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: id}}, nil); err != nil {
			return dist{}, 0, fmt.Errorf("agent.detach: %w", err)
		}
		t0 := time.Now()
		if err := call(tap.c, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, nil); err != nil {
			return dist{}, 0, fmt.Errorf("agent.attach: %w", err)
		}
		r, err := tap.next(id, isType(protocol.TypeSync))
		if err != nil {
			return dist{}, 0, err
		}
		lats, size = append(lats, r.at.Sub(t0)), len(r.ev.Raw)
	}
	return summarize(lats), size, nil
}

// firstDeltaSamples prompts id n times on tap's attached connection:
// prompt sent → the turn's first text delta, then waits for turn_end.
func firstDeltaSamples(tap *streamTap, id string, n int) (dist, error) {
	var lats []time.Duration
	for range n {
		t0 := time.Now()
		if err := prompt(tap.c, id, "sim: say hi"); err != nil {
			return dist{}, fmt.Errorf("prompt: %w", err)
		}
		r, err := tap.next(id, isTextDelta)
		if err != nil {
			return dist{}, err
		}
		lats = append(lats, r.at.Sub(t0))
		if _, err := tap.next(id, isType(protocol.TypeTurnEnd)); err != nil {
			return dist{}, err
		}
	}
	return summarize(lats), nil
}

// floodOn prompts a stamped flood of n deltas of size bytes (paced at
// rate deltas/s, 0 unpaced) on tap's attached connection and reads it to
// the turn's end.
func floodOn(tap *streamTap, id string, n, size, rate int) (streamStats, error) {
	st := streamStats{Deltas: n, Bytes: size, Rate: rate}
	cmd := fmt.Sprintf("sim: flood %d %d stamp", n, size)
	if rate > 0 {
		cmd += fmt.Sprintf(" rate %d", rate)
	}
	if err := prompt(tap.c, id, cmd); err != nil {
		return st, fmt.Errorf("prompt: %w", err)
	}
	lats := make([]time.Duration, 0, n)
	var first, last time.Time
	for {
		r, err := tap.next(id, func(m protocol.Typed) bool { return isTextDelta(m) || m.Head().Type == protocol.TypeTurnEnd })
		if err != nil {
			return st, fmt.Errorf("after %d deltas: %w", len(lats), err)
		}
		d, ok := r.ev.Msg.(*protocol.MessageDelta)
		if !ok {
			break // turn_end
		}
		stamp, ok := refagent.ParseFloodStamp(d.TextDelta)
		if !ok {
			return st, fmt.Errorf("delta without a stamp: %.40q", d.TextDelta)
		}
		if first.IsZero() {
			first = r.at
		}
		last = r.at
		lats = append(lats, time.Duration(r.at.UnixNano()-stamp))
	}
	if len(lats) != n {
		return st, fmt.Errorf("%d of %d deltas received", len(lats), n)
	}
	st.Seconds = last.Sub(first).Seconds()
	if st.Seconds > 0 {
		st.EventsPerSec = float64(n-1) / st.Seconds
		st.MBPerSec = st.EventsPerSec * float64(size) / 1e6
	}
	st.Latency = summarize(lats)
	return st, nil
}

// attachOn is the attach phase on the three nodes of cl (started with
// floodEnv): a new agent on n3, each path measured in turn.
func attachOn(cl *clusterOf, samples, paced, unpaced, rate int) ([]attachPath, error) {
	if len(cl.nodes) != 3 {
		return nil, fmt.Errorf("the attach phase needs three nodes, not %d", len(cl.nodes))
	}
	var err error
	conns := make([]*client.Conn, len(cl.nodes))
	for i, d := range cl.nodes {
		if conns[i], err = d.dial(); err != nil {
			return nil, err
		}
		drain(conns[i])
	}
	var out []attachPath
	for _, p := range []struct {
		path string
		via  int
	}{{"same-node", 2}, {"cross-node", 0}} {
		// Each path has an agent of its own, so that both attach to the
		// same history: a sync carries the agent's live window, which the
		// other path's floods would have filled.
		id, err := createAgent(conns[2])
		if err != nil {
			return nil, err
		}
		// n1 forwards commands for an agent it knows from the directory.
		if _, err := waitDirectory(cl, conns, []string{id}, []int{2}); err != nil {
			return nil, err
		}
		d := cl.nodes[p.via]
		ap := attachPath{Path: p.path, Via: cl.names[p.via], Host: "n3"}
		// One attach and one prompt untimed first: the first of a path
		// sets up what the next reuse (n1's upstream to n3, caches).
		if _, err := attachSamples(d, id, 1); err != nil {
			return nil, fmt.Errorf("%s warm-up attach: %w", p.path, err)
		}
		if ap.Attach, err = attachSamples(d, id, samples); err != nil {
			return nil, fmt.Errorf("%s attach: %w", p.path, err)
		}
		c, err := d.dial()
		if err != nil {
			return nil, err
		}
		tap := newStreamTap(c)
		if err := call(c, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, nil); err != nil {
			return nil, fmt.Errorf("%s: agent.attach: %w", p.path, err)
		}
		if _, err := tap.next(id, isType(protocol.TypeSync)); err != nil {
			return nil, err
		}
		if ap.Reattach, err = reattachSamples(tap, id, samples); err != nil {
			return nil, fmt.Errorf("%s reattach: %w", p.path, err)
		}
		if _, err := firstDeltaSamples(tap, id, 1); err != nil {
			return nil, fmt.Errorf("%s warm-up prompt: %w", p.path, err)
		}
		if ap.First, err = firstDeltaSamples(tap, id, samples); err != nil {
			return nil, fmt.Errorf("%s first delta: %w", p.path, err)
		}
		if ap.Paced, err = floodOn(tap, id, paced, 64, rate); err != nil {
			return nil, fmt.Errorf("%s paced flood: %w", p.path, err)
		}
		if ap.Unpaced, err = floodOn(tap, id, unpaced, 256, 0); err != nil {
			return nil, fmt.Errorf("%s unpaced flood: %w", p.path, err)
		}
		// Now the live window holds both floods.
		if ap.ReattachFull, ap.FullSyncBytes, err = reattachSyncs(tap, id, samples); err != nil {
			return nil, fmt.Errorf("%s reattach after the floods: %w", p.path, err)
		}
		c.Close()
		out = append(out, ap)
	}
	return out, nil
}
