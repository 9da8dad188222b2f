//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/refagent"
)

// Fan-out target (BENCHMARKS.md): added latency p99 ≤ 1 ms at 5,000 events/s to
// 10 clients. That configuration is the headline row.
const (
	fanoutTargetP99     = 1.0 // ms
	fanoutTargetRate    = 5000
	fanoutTargetClients = 10
)

type fanoutPhase struct {
	Clients   int    `json:"clients"`
	Transport string `json:"transport"` // unix, ws, or stdio for the no-daemon baseline
	Deltas    int    `json:"deltas"`
	Bytes     int    `json:"bytes"`
	Rate      int    `json:"offered_events_per_s"` // 0: unpaced
	// Added latency: each client's receive time (see fanoutResult.Receiver)
	// minus the runtime's stamp taken as the delta left the sim, over
	// every (delta, client).
	Latency dist `json:"added_latency"`
	// Skew: each client's receive time minus the earliest receive time of
	// the same delta over all clients (0 for one client).
	Skew dist `json:"fanout_skew"`
	// Earliest: per delta, the added latency at the first client to
	// receive it. The clients all read in the driver, on the cores the
	// daemon uses, so the later clients of a delta wait for the driver to
	// read the earlier ones too (Skew); this is the delta's latency without
	// that wait, the closest figure to the baseline's single reader.
	Earliest dist `json:"earliest_client_latency"`
	// Seconds is the whole turn: prompt sent → the last client's
	// turn_end.
	Seconds float64 `json:"seconds"`
	// EventsPerS and SourcePerS count the delta stream, the offered load:
	// deltas over prompt sent → the last delta at the slowest client. The
	// turn's end (message_complete carries the whole message, 640 KB at
	// the default sizes, to every client) is not part of it: TurnEndMs.
	EventsPerS float64 `json:"delivered_events_per_s"`
	SourcePerS float64 `json:"source_events_per_s"`
	// TurnEndMs is the last delta at the slowest client → the last
	// client's turn_end.
	TurnEndMs    float64 `json:"turn_end_after_last_delta_ms"`
	MBPerS       float64 `json:"delivered_mb_per_s"`
	FirstLatency float64 `json:"first_delta_ms"`
	// CPU from the prompt to the last turn_end, in cores (1 = one core
	// busy), and the daemon's CPU per delivered event.
	CPU              cpuUse  `json:"cpu"`
	DaemonUsPerEvent float64 `json:"daemon_cpu_us_per_delivered_event"`
	LoadAvg          float64 `json:"loadavg_1m"`
	Headline         bool    `json:"headline,omitempty"`
	TargetMet        *bool   `json:"target_met,omitempty"` // headline rows only
	Error            string  `json:"error,omitempty"`

	latencies []time.Duration // for the plots
}

type fanoutResult struct {
	Target   string        `json:"target"`
	Receiver string        `json:"receiver"` // probe or client (--receiver)
	Headline []fanoutPhase `json:"headline"`
	Baseline *fanoutPhase  `json:"baseline,omitempty"`
	// Floor: the bare relay (floor.go) to each unix client count, the
	// least any relay process adds here (transport "floor").
	Floor  []fanoutPhase `json:"floor,omitempty"`
	Phases []fanoutPhase `json:"phases"`
}

// runFanout: for each transport and client count C, a fresh daemon and one
// agent flooding --n stamped deltas at --rate deltas/s to C attached
// clients (plus the prompting connection, not measured); before them, the
// same stamped flood read directly from a runtime's stdout, no daemon.
func runFanout(o *options) (*report, error) {
	n := pick(o.n, 10000, 2000, o.quick)
	size := pick(o.bytes, 64, 64, o.quick)
	rate := pick(o.rate, fanoutTargetRate, fanoutTargetRate, o.quick)
	if o.rate < 0 {
		rate = 0 // unpaced
	}
	cs, err := ints(o.clients, []int{1, 10, 100})
	if err != nil {
		return nil, err
	}
	transports, err := fanoutTransports(o)
	if err != nil {
		return nil, err
	}
	if o.receiver != "probe" && o.receiver != "client" {
		return nil, fmt.Errorf("--receiver %q: want probe or client", o.receiver)
	}
	if size < 20 {
		return nil, fmt.Errorf("--bytes %d: a stamped delta needs at least 20", size)
	}
	flood := fmt.Sprintf("sim: flood %d %d stamp", n, size)
	if rate > 0 {
		flood += fmt.Sprintf(" rate %d", rate)
	}

	res := fanoutResult{Receiver: o.receiver, Target: fmt.Sprintf("added latency p99 ≤ %g ms at %d events/s to %d clients", fanoutTargetP99, fanoutTargetRate, fanoutTargetClients)}
	base, err := fanoutBaseline(o, flood, n, size, rate)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	res.Baseline = &base
	if slices.Contains(transports, "unix") {
		for _, c := range cs {
			mark := cleanupMark()
			ph, err := fanoutFloor(o, flood, c, n, size)
			ph.Clients, ph.Transport, ph.Deltas, ph.Bytes, ph.Rate = c, "floor", n, size, rate
			if err != nil {
				ph.Error = err.Error()
				fmt.Fprintf(os.Stderr, "bench fanout: bare relay to %d clients: %v\n", c, err)
			}
			res.Floor = append(res.Floor, ph)
			runCleanupsFrom(mark)
		}
	}

	// The headline configuration runs first, so that its daemon's CPU
	// profile is the first one reported.
	type run struct {
		transport string
		clients   int
	}
	var runs []run
	for _, tr := range transports {
		for _, c := range cs {
			runs = append(runs, run{tr, c})
		}
	}
	slices.SortStableFunc(runs, func(a, b run) int {
		ha, hb := a.clients == fanoutTargetClients, b.clients == fanoutTargetClients
		switch {
		case ha && !hb:
			return -1
		case hb && !ha:
			return 1
		}
		return 0
	})
	for _, r := range runs {
		mark := cleanupMark()
		o.profileTag = fmt.Sprintf("c%d-%s", r.clients, r.transport)
		ph, err := fanoutRun(o, r.transport, r.clients, flood, n, size, rate)
		ph.Clients, ph.Transport, ph.Deltas, ph.Bytes, ph.Rate = r.clients, r.transport, n, size, rate
		if err != nil {
			// A phase that fails (a client dropped as a slow consumer, a
			// timeout) is reported, not fatal: the others still say
			// something.
			ph.Error = err.Error()
			fmt.Fprintf(os.Stderr, "bench fanout: %d clients over %s: %v\n", r.clients, r.transport, err)
		}
		if r.clients == fanoutTargetClients && rate == fanoutTargetRate {
			ph.Headline = true
			met := ph.Error == "" && ph.Latency.P99 <= fanoutTargetP99
			ph.TargetMet = &met
		}
		res.Phases = append(res.Phases, ph)
		runCleanupsFrom(mark)
	}
	o.profileTag = ""
	slices.SortStableFunc(res.Phases, func(a, b fanoutPhase) int {
		if c := strings.Compare(a.Transport, b.Transport); c != 0 {
			return c // unix before ws
		}
		return a.Clients - b.Clients
	})
	for _, p := range res.Phases {
		if p.Headline {
			res.Headline = append(res.Headline, p)
		}
	}

	rep := &report{Header: []string{"", "clients", "transport", "deltas", "offered ev/s", "source ev/s", "delivered ev/s",
		"lat p50 ms", "lat p99 ms", "lat p999 ms", "lat max ms", "skew p50 ms", "skew p99 ms", "skew p999 ms", "earliest p99 ms", "first ms", "turn end ms",
		"daemon cores", "driver cores", "daemon µs/ev", "load"}, Results: res}
	row := func(mark string, p fanoutPhase) {
		if p.Error != "" {
			rep.Rows = append(rep.Rows, []string{mark, fmt.Sprint(p.Clients), p.Transport, fmt.Sprint(p.Deltas), rateStr(p.Rate),
				"failed", "", "", "", "", "", "", "", "", "", "", "", "", "", "", ""})
			return
		}
		cpu := []string{f2(p.CPU.Daemon), f2(p.CPU.Driver), f2(p.DaemonUsPerEvent), f2(p.LoadAvg)}
		if p.Transport == "stdio" {
			cpu = []string{"", "", "", ""}
		}
		rep.Rows = append(rep.Rows, append([]string{mark, fmt.Sprint(p.Clients), p.Transport, fmt.Sprint(p.Deltas), rateStr(p.Rate),
			f0(p.SourcePerS), f0(p.EventsPerS), f3(p.Latency.P50), f3(p.Latency.P99), f3(p.Latency.P999), f3(p.Latency.Max),
			f3(p.Skew.P50), f3(p.Skew.P99), f3(p.Skew.P999), f3(p.Earliest.P99), f2(p.FirstLatency), f2(p.TurnEndMs)}, cpu...))
	}
	for _, p := range res.Headline {
		row("headline", p)
	}
	row("baseline", base)
	for _, p := range res.Floor {
		row("floor", p)
	}
	for _, p := range res.Phases {
		row("", p)
	}
	for _, p := range res.Headline {
		verdict := "NOT MET"
		if *p.TargetMet {
			verdict = "met"
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("target %s over %s: p99 %s ms → %s", res.Target, p.Transport, f3(p.Latency.P99), verdict))
		if p.Transport != "unix" || p.Error != "" || base.Latency.P99 <= 0 {
			continue
		}
		line := fmt.Sprintf("over unix: p99 %s ms = %.1f× the stdio baseline's %s ms", f3(p.Latency.P99), p.Latency.P99/base.Latency.P99, f3(base.Latency.P99))
		for _, f := range res.Floor {
			if f.Clients == p.Clients && f.Error == "" && f.Latency.P99 > 0 {
				line += fmt.Sprintf(", %.1f× the bare relay's %s ms (which is %.1f× the baseline)", p.Latency.P99/f.Latency.P99, f3(f.Latency.P99), f.Latency.P99/base.Latency.P99)
			}
		}
		rep.Notes = append(rep.Notes, line)
	}
	if len(res.Headline) == 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("no headline row: the target configuration (%d clients, --rate %d) was not run", fanoutTargetClients, fanoutTargetRate))
	}
	for _, p := range res.Phases {
		if p.Error != "" {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d clients over %s failed: %s", p.Clients, p.Transport, p.Error))
		}
	}
	rep.Notes = append(rep.Notes,
		"added latency: client receive time − the stamp the runtime wrote into the delta just before writing it to stdout (same machine, same wall clock), over every delta × client",
		receiverNote(o.receiver),
		"baseline: the same runtime's stamped flood read straight from its stdout by the driver (parsed the same way), no daemon: the floor the daemon's rows add to",
		"floor: a bare relay process (this binary) runs the same runtime and copies each chunk of its stdout to every unix client with one write per client, nothing else (no protocol, no parsing, no queue), read by the same probes and, like the daemon rows, on the first flood: what any relay process adds to the baseline on this machine (its cores column is the relay process's)",
		fmt.Sprintf("pacing is open-loop (delta i due i/rate after the first); Go timers sleep ≥ ~1 ms here, so at %d ev/s deltas leave in bursts of a few per timer tick and the latency includes that burst's queueing", rate),
		"skew: per delta, each client's receive time − the earliest receive time of that delta (0 for one client)",
		"earliest: per delta, the added latency at the first client that received it (the baseline's single reader has no later clients to read first)",
		"source ev/s = deltas / (prompt sent → the last delta at the slowest client), the offered stream; delivered = clients × that; first ms = prompt sent → first delta at any client; turn end ms = that last delta → the last client's turn_end (the turn's message_complete carries the whole flooded message, deltas × bytes, to every client; until 2026-12-03 the rates were counted to turn_end and included it)",
		"the clients run in the driver, on the same 2 cores as the daemon: at 100 clients the driver's own reading competes with the daemon (probes read raw records: JSONL over unix, unmasked frames over WebSocket)",
		"cores: CPU time over the flood's wall time (1.00 = one core busy; daemon = shardd alone; driver = this process and its clients); daemon µs/ev = shardd CPU per delivered event; load = 1-minute load average at the end of the phase (other users of the machine raise it)")
	rep.plot = func(dir string) ([]string, error) { return plotFanout(dir, res) }
	return rep, nil
}

func receiverNote(r string) string {
	if r == "client" {
		return "receiver client: each measured client is a client.Conn; receive time is when the record, read and decoded by the library, comes off Events"
	}
	return "receiver probe: each measured client is a raw connection of its own that parses only the stamp out of each record (no JSON decode), so the driver's CPU competes less with the daemon's; receive time is right after the record was read (--receiver client measures through the client library)"
}

func rateStr(r int) string {
	if r == 0 {
		return "unpaced"
	}
	return fmt.Sprint(r)
}

// fanoutTransports is --transports (--ws alone means ws).
func fanoutTransports(o *options) ([]string, error) {
	spec := o.transports
	if spec == "" {
		spec = "unix,ws"
		if o.ws {
			spec = "ws"
		}
	}
	var out []string
	for _, t := range strings.Split(spec, ",") {
		t = strings.TrimSpace(t)
		if t != "unix" && t != "ws" {
			return nil, fmt.Errorf("--transports %q: want unix and/or ws", spec)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func fanoutRun(o *options, transport string, clients int, flood string, n, size, rate int) (fanoutPhase, error) {
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
	// Each measured client attaches over its own connection and reads
	// until the turn ends, recording every delta's receive time and stamp.
	recvs := newFanoutRecvs(clients, n)
	loops := make([]func(r *fanoutRecv), clients)
	for i := range clients {
		if o.receiver == "client" {
			var c *client.Conn
			if transport == "ws" {
				c, err = d.dialWS(ctl)
			} else {
				c, err = d.dial()
			}
			if err != nil {
				return fanoutPhase{}, fmt.Errorf("client %d: %w", i, err)
			}
			if _, _, err := attachSync(c, id); err != nil {
				return fanoutPhase{}, fmt.Errorf("client %d: %w", i, err)
			}
			loops[i] = func(r *fanoutRecv) {
				timeout := time.After(fanoutTimeout)
				for {
					select {
					case ev, ok := <-c.Events():
						if !ok {
							r.err = fmt.Errorf("connection ended: %v", c.Err())
							return
						}
						switch m := ev.Msg.(type) {
						case *protocol.MessageDelta:
							if m.AgentID == id && m.Kind == protocol.DeltaText && !r.record(time.Now().UnixNano(), m.TextDelta) {
								return
							}
						case *protocol.TurnEnd:
							if m.AgentID == id {
								r.end = time.Now()
								return
							}
						}
					case <-timeout:
						r.err = fmt.Errorf("no turn_end within %s", fanoutTimeout)
						return
					}
				}
			}
			continue
		}
		p, err := dialProbe(d, ctl, transport, id)
		if err != nil {
			return fanoutPhase{}, fmt.Errorf("client %d: %w", i, err)
		}
		loops[i] = p.loop
	}
	results := make(chan int, clients)
	for i := range clients {
		go func() {
			defer func() { results <- i }()
			loops[i](&recvs[i])
		}()
	}
	cpu0 := d.cpu()
	start := time.Now()
	if err := prompt(ctl, id, flood); err != nil {
		return fanoutPhase{}, err
	}
	last, err := awaitFanout(recvs, results, n)
	if err != nil {
		return fanoutPhase{}, err
	}
	cpu1 := d.cpu()
	// The measured phase ends here: stop the daemon now (gracefully, so a
	// CPU profile is flushed) rather than after the statistics.
	if o.cpuprofile != "" {
		if err := d.shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "bench fanout: %v: its CPU profile may be missing\n", err)
		}
	}
	return fanoutStats(recvs, n, size, start, last, cpu0, cpu1), nil
}

// fanoutRecv is what one measuring client received of a flood.
type fanoutRecv struct {
	times []int64 // receive times, UnixNano, in delta order
	lats  []time.Duration
	end   time.Time
	err   error
}

func newFanoutRecvs(clients, n int) []fanoutRecv {
	recvs := make([]fanoutRecv, clients)
	for i := range recvs {
		recvs[i].times = make([]int64, 0, n)
		recvs[i].lats = make([]time.Duration, 0, n)
	}
	return recvs
}

// record notes a stamped delta's text received at now; false (with r.err
// set) when it carries no stamp.
func (r *fanoutRecv) record(now int64, text string) bool {
	stamp, ok := refagent.ParseFloodStamp(text)
	if !ok {
		r.err = fmt.Errorf("delta without a stamp: %.40q", text)
		return false
	}
	r.times = append(r.times, now)
	r.lats = append(r.lats, time.Duration(now-stamp))
	return true
}

// awaitFanout collects the clients' loops as results names them ended
// and returns the last turn_end, or the first client's failure.
func awaitFanout(recvs []fanoutRecv, results <-chan int, n int) (last time.Time, err error) {
	for range recvs {
		i := <-results
		r := recvs[i]
		if err != nil {
			continue
		}
		switch {
		case r.err != nil:
			err = fmt.Errorf("client %d: %w", i, r.err)
		case len(r.times) != n:
			err = fmt.Errorf("client %d received %d of %d deltas", i, len(r.times), n)
		}
		if r.end.After(last) {
			last = r.end
		}
	}
	return last, err
}

// fanoutStats summarizes a flood of n deltas of size bytes received by
// every client in recvs: the prompt went at start, the last client's
// turn_end came at last, and cpu0/cpu1 bracket the flood (the daemon's
// slot holds whatever process relayed it).
func fanoutStats(recvs []fanoutRecv, n, size int, start, last time.Time, cpu0, cpu1 cpuSnap) fanoutPhase {
	clients := len(recvs)
	wall := last.Sub(start)
	var lastDelta int64
	for _, r := range recvs {
		lastDelta = max(lastDelta, r.times[n-1])
	}
	stream := time.Duration(lastDelta - start.UnixNano())
	skews := make([]time.Duration, 0, clients*n)
	lats := make([]time.Duration, 0, clients*n)
	earliest := make([]time.Duration, 0, n)
	first := int64(1<<63 - 1)
	for k := range n {
		tmin, lmin := recvs[0].times[k], recvs[0].lats[k]
		for _, r := range recvs[1:] {
			tmin, lmin = min(tmin, r.times[k]), min(lmin, r.lats[k])
		}
		earliest = append(earliest, lmin)
		first = min(first, tmin)
		for _, r := range recvs {
			skews = append(skews, time.Duration(r.times[k]-tmin))
		}
	}
	for _, r := range recvs {
		lats = append(lats, r.lats...)
	}
	s, ds := wall.Seconds(), stream.Seconds()
	return fanoutPhase{Seconds: s, EventsPerS: float64(clients*n) / ds, SourcePerS: float64(n) / ds, MBPerS: float64(clients*n*size) / 1e6 / ds,
		TurnEndMs: ms(wall - stream),
		Latency:   summarize(lats), Skew: summarize(skews), Earliest: summarize(earliest), FirstLatency: ms(time.Duration(first - start.UnixNano())), latencies: lats,
		CPU: cpuBetween(cpu0, cpu1, wall), DaemonUsPerEvent: (cpu1.daemon - cpu0.daemon).Seconds() * 1e6 / float64(clients*n), LoadAvg: loadAvg()}
}

// fanoutTimeout bounds one flood at one client.
const fanoutTimeout = 5 * time.Minute

// What a probe looks for in a record, without decoding it: the one agent's
// flood is the only text in the turn, and its deltas are pure ASCII.
var (
	textDeltaKey = []byte(`"text_delta":"`)
	turnEndType  = []byte(`"type":"turn_end"`)
)

// probe is a lean measuring client. It attaches over a connection of its
// own and returns raw records, decoding none: the driver shares the
// machine's cores with the daemon, and the client library's full decode of
// every record (two JSON passes and a channel hop) would take more CPU
// than the daemon spends relaying it (--receiver client measures with it).
// Over WebSocket it reads frames with rawWS, for the same reason.
type probe struct {
	read func() ([]byte, error) // the next record; valid until the next call
}

// loop records every stamped delta p reads into r until the turn ends.
func (p *probe) loop(r *fanoutRecv) {
	for {
		rec, err := p.read()
		if err != nil {
			r.err = err
			return
		}
		now := time.Now().UnixNano()
		if j := bytes.LastIndex(rec, textDeltaKey); j >= 0 { // the text ends the record: LastIndex finds the key soonest
			text := rec[j+len(textDeltaKey):]
			if !r.record(now, string(text[:min(len(text), 20)])) {
				return
			}
		} else if bytes.Contains(rec, turnEndType) {
			r.end = time.Now()
			return
		}
	}
}

// dialProbe connects a probe over transport (unix or ws; ctl mints the
// WebSocket ticket) and attaches it to agent id, returning once its sync
// arrived. Its connection is closed at cleanup.
func dialProbe(d *daemon, ctl *client.Conn, transport, id string) (*probe, error) {
	attach := []byte(`{"type":"agent.attach","id":"probe-attach","agent_id":` + strconv.Quote(id) + `}`)
	var p probe
	switch transport {
	case "unix":
		nc, err := net.DialTimeout("unix", d.socket(), 5*time.Second)
		if err != nil {
			return nil, err
		}
		atCleanup(func() { nc.Close() })
		_ = nc.SetDeadline(time.Now().Add(fanoutTimeout))
		rd := protocol.NewReader(nc, 0)
		p.read = rd.Next
		if _, err := nc.Write(append(attach, '\n')); err != nil {
			return nil, err
		}
	case "ws":
		var tk protocol.WSTicketData
		if err := call(ctl, &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}, &tk); err != nil {
			return nil, fmt.Errorf("ws.ticket: %w", err)
		}
		w, err := dialRawWS("ws"+strings.TrimPrefix(tk.URL, "http"), []string{protocol.Subprotocol, protocol.TicketProtocolPrefix + tk.Ticket}, 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("websocket dial: %w", err)
		}
		atCleanup(func() { w.Close() })
		_ = w.nc.SetDeadline(time.Now().Add(fanoutTimeout))
		p.read = w.next
		if err := w.writeText(attach); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown transport %q", transport)
	}
	for {
		rec, err := p.read()
		if err != nil {
			return nil, fmt.Errorf("waiting for sync: %w", err)
		}
		switch h, _ := protocol.DecodeHeader(rec); {
		case h.Type == protocol.TypeResponse && h.ID == "probe-attach" && bytes.Contains(rec, []byte(`"success":false`)):
			return nil, fmt.Errorf("agent.attach refused: %s", rec)
		case h.Type == protocol.TypeSync && h.AgentID == id:
			return &p, nil
		}
	}
}

// fanoutBaseline runs the stamped flood on a runtime driven over its stdio
// pipes (no daemon) after one warm-up flood, and measures the same added
// latency: receive (read, and parsed as the measured clients do) − stamp.
func fanoutBaseline(o *options, flood string, n, size, rate int) (fanoutPhase, error) {
	mark := cleanupMark()
	defer runCleanupsFrom(mark)
	dr, err := startDirect(o)
	if err != nil {
		return fanoutPhase{}, err
	}
	var lats []time.Duration
	var times []int64
	var start, end time.Time
	for range 2 { // a warm-up flood, then the measured one
		lats, times = lats[:0], times[:0]
		dr.seq++
		rec, err := json.Marshal(&protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, ID: fmt.Sprint("b", dr.seq)}, Message: flood})
		if err != nil {
			return fanoutPhase{}, err
		}
		start = time.Now()
		if _, err := dr.in.Write(append(rec, '\n')); err != nil {
			return fanoutPhase{}, err
		}
	read:
		for {
			line, err := dr.out.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				continue // a long record (sync), not a delta
			}
			if err != nil {
				return fanoutPhase{}, fmt.Errorf("read runtime stdout: %w", err)
			}
			now := time.Now().UnixNano()
			if bytes.Contains(line, []byte(`"success":false`)) {
				return fanoutPhase{}, fmt.Errorf("prompt refused: %s", line)
			}
			text := ""
			if o.receiver == "client" { // decode every record, like the client library
				msg, err := protocol.DecodeEvent(line[:len(line)-1])
				if err != nil {
					continue
				}
				switch m := msg.(type) {
				case *protocol.MessageDelta:
					if m.Kind != protocol.DeltaText {
						continue
					}
					text = m.TextDelta
				case *protocol.TurnEnd:
					end = time.Now()
					break read
				default:
					continue
				}
			} else { // like a probe
				j := bytes.Index(line, textDeltaKey)
				if j < 0 {
					if bytes.Contains(line, turnEndType) {
						end = time.Now()
						break read
					}
					continue
				}
				rest := line[j+len(textDeltaKey):]
				text = string(rest[:min(len(rest), 20)])
			}
			stamp, ok := refagent.ParseFloodStamp(text)
			if !ok {
				return fanoutPhase{}, fmt.Errorf("delta without a stamp: %.40q", text)
			}
			times = append(times, now)
			lats = append(lats, time.Duration(now-stamp))
		}
	}
	if len(lats) != n {
		return fanoutPhase{}, fmt.Errorf("received %d of %d deltas", len(lats), n)
	}
	turn, stream := end.Sub(start), time.Duration(times[n-1]-start.UnixNano())
	s, ds := turn.Seconds(), stream.Seconds()
	return fanoutPhase{Clients: 1, Transport: "stdio", Deltas: n, Bytes: size, Rate: rate, Seconds: s,
		EventsPerS: float64(n) / ds, SourcePerS: float64(n) / ds, MBPerS: float64(n*size) / 1e6 / ds,
		TurnEndMs: ms(turn - stream),
		Latency:   summarize(lats), Skew: summarize(make([]time.Duration, n)), Earliest: summarize(lats), FirstLatency: ms(time.Duration(times[0] - start.UnixNano())),
		latencies: lats}, nil
}
