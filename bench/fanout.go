//go:build linux

package main

import (
	"fmt"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

type fanoutPhase struct {
	Clients      int     `json:"clients"`
	Transport    string  `json:"transport"`
	Deltas       int     `json:"deltas"`
	Bytes        int     `json:"bytes"`
	Seconds      float64 `json:"seconds"`
	EventsPerS   float64 `json:"delivered_events_per_s"`
	SourcePerS   float64 `json:"source_events_per_s"`
	MBPerS       float64 `json:"delivered_mb_per_s"`
	Skew         dist    `json:"fanout_skew"`
	FirstLatency float64 `json:"first_delta_ms"`
}

// runFanout: one agent floods --n deltas of --bytes bytes while C clients
// are attached; for each C a fresh daemon. Deltas carry no timestamp, so
// the per-event figure is the fan-out skew: for every delta, each client's
// receive time minus the earliest receive time of that delta over all
// clients. It is 0 by construction for one client.
func runFanout(o *options) (*report, error) {
	n := pick(o.n, 5000, 1000, o.quick)
	size := pick(o.bytes, 64, 64, o.quick)
	cs, err := ints(o.clients, []int{1, 10, 100})
	if err != nil {
		return nil, err
	}
	var phases []fanoutPhase
	for _, c := range cs {
		mark := cleanupMark()
		ph, err := fanoutRun(o, c, n, size)
		if err != nil {
			return nil, fmt.Errorf("%d clients: %w", c, err)
		}
		phases = append(phases, ph)
		runCleanupsFrom(mark)
	}
	rep := &report{Header: []string{"clients", "transport", "deltas", "delivered ev/s", "source ev/s", "MB/s", "skew p50 ms", "skew p99 ms", "skew p999 ms", "skew max ms", "first ms", "seconds"}, Results: phases}
	for _, p := range phases {
		rep.Rows = append(rep.Rows, []string{fmt.Sprint(p.Clients), p.Transport, fmt.Sprint(p.Deltas), f0(p.EventsPerS), f0(p.SourcePerS), f2(p.MBPerS),
			f3(p.Skew.P50), f3(p.Skew.P99), f3(p.Skew.P999), f3(p.Skew.Max), f2(p.FirstLatency), f3(p.Seconds)})
	}
	rep.Notes = append(rep.Notes,
		"skew: per delta, each client's receive time minus the earliest receive time of the same delta (0 for one client); deltas carry no send timestamp, so added latency against the source is not measured yet",
		"delivered ev/s = clients × deltas / (prompt sent → last client's turn_end); source ev/s = deltas / same; first ms = prompt sent → first delta at any client")
	return rep, nil
}

func fanoutRun(o *options, clients, n, size int) (fanoutPhase, error) {
	d, err := startDaemon(o, floodEnv)
	if err != nil {
		return fanoutPhase{}, err
	}
	ctl, err := d.dial()
	if err != nil {
		return fanoutPhase{}, err
	}
	id, err := createAgent(ctl)
	if err != nil {
		return fanoutPhase{}, err
	}
	// The control connection is attached too (the prompting client), but
	// not measured.
	if _, _, err := attachSync(ctl, id); err != nil {
		return fanoutPhase{}, err
	}
	drain(ctl)
	transport := "unix"
	if o.ws {
		transport = "ws"
	}
	conns := make([]*client.Conn, clients)
	for i := range conns {
		if o.ws {
			conns[i], err = d.dialWS(ctl)
		} else {
			conns[i], err = d.dial()
		}
		if err != nil {
			return fanoutPhase{}, fmt.Errorf("client %d: %w", i, err)
		}
		if _, _, err := attachSync(conns[i], id); err != nil {
			return fanoutPhase{}, fmt.Errorf("client %d: %w", i, err)
		}
	}
	type recv struct {
		times []int64
		end   time.Time
		err   error
	}
	results := make(chan int, clients)
	recvs := make([]recv, clients)
	for i, c := range conns {
		recvs[i].times = make([]int64, 0, n)
		go func() {
			r := &recvs[i]
			defer func() { results <- i }()
			timeout := time.After(5 * time.Minute)
			for {
				select {
				case ev, ok := <-c.Events():
					if !ok {
						r.err = fmt.Errorf("connection ended: %v", c.Err())
						return
					}
					switch m := ev.Msg.(type) {
					case *protocol.MessageDelta:
						if m.AgentID == id && m.Kind == protocol.DeltaText {
							r.times = append(r.times, time.Now().UnixNano())
						}
					case *protocol.TurnEnd:
						if m.AgentID == id {
							r.end = time.Now()
							return
						}
					}
				case <-timeout:
					r.err = fmt.Errorf("no turn_end within 5m")
					return
				}
			}
		}()
	}
	start := time.Now()
	if err := prompt(ctl, id, fmt.Sprintf("sim: flood %d %d", n, size)); err != nil {
		return fanoutPhase{}, err
	}
	var last time.Time
	for range clients {
		i := <-results
		r := recvs[i]
		if r.err != nil {
			return fanoutPhase{}, fmt.Errorf("client %d: %w", i, r.err)
		}
		if len(r.times) != n {
			return fanoutPhase{}, fmt.Errorf("client %d received %d of %d deltas", i, len(r.times), n)
		}
		if r.end.After(last) {
			last = r.end
		}
	}
	wall := last.Sub(start)
	skews := make([]time.Duration, 0, clients*n)
	first := int64(1<<63 - 1)
	for k := range n {
		tmin := recvs[0].times[k]
		for _, r := range recvs[1:] {
			tmin = min(tmin, r.times[k])
		}
		first = min(first, tmin)
		for _, r := range recvs {
			skews = append(skews, time.Duration(r.times[k]-tmin))
		}
	}
	s := wall.Seconds()
	return fanoutPhase{Clients: clients, Transport: transport, Deltas: n, Bytes: size, Seconds: s,
		EventsPerS: float64(clients*n) / s, SourcePerS: float64(n) / s, MBPerS: float64(clients*n*size) / 1e6 / s,
		Skew: summarize(skews), FirstLatency: ms(time.Duration(first - start.UnixNano()))}, nil
}
