//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// Scale target (BENCHMARKS.md): ≥ 500 live idle agents with daemon overhead ≤
// 64 KiB per agent.
const (
	scaleTargetAgents = 500
	scaleTargetKiB    = 64
)

const (
	// scaleWorkers is how many agent.create (then attach and prompt)
	// calls are in flight at once.
	scaleWorkers = 8
	// scaleAgentsPerConn is how many agents share one attached client
	// connection.
	scaleAgentsPerConn = 100
	// scaleMemFloor is the MemAvailable under which no further agent is
	// created: every runtime child is a Go process of its own.
	scaleMemFloor = 4 << 20 // KiB
	// scaleChildGuess is the memory a runtime child is assumed to take
	// before one was measured, to decide whether a phase fits. It is a
	// child's own memory (PSS, twice over for the heap a child holds
	// between a turn and its idle trim), not its RSS: the executable's
	// pages RSS counts are shared by every child. While a phase runs,
	// MemAvailable is watched as well (scaleMemFloor).
	scaleChildGuess = 16 << 10 // KiB
	// scaleSettle is the pause before a memory snapshot.
	scaleSettle = time.Second
	// scaleIdleSettle is the pause before the live-idle snapshot: longer
	// than the runtime's idle trim delay (runtime.Options.TrimAfter, 2 s),
	// so the children are measured as they idle, not as their last turn
	// left them.
	scaleIdleSettle = 3 * time.Second
)

// scaleSnap is the daemon's state at one moment.
type scaleSnap struct {
	RSSKiB     int64   `json:"rss_kib"`
	Goroutines float64 `json:"goroutines"`
	HeapInuse  float64 `json:"heap_inuse_kib"`
	Running    float64 `json:"runtimes_running"`
	Stopped    float64 `json:"runtimes_stopped"`
}

// scalePer is a snapshot's growth over the pre-spawn snapshot, divided by
// the agent count.
type scalePer struct {
	RSSKiB     float64 `json:"rss_kib"`
	Goroutines float64 `json:"goroutines"`
	HeapInuse  float64 `json:"heap_inuse_kib"`
}

type scalePhase struct {
	Agents        int     `json:"agents"` // asked for
	Created       int     `json:"created"`
	Connections   int     `json:"connections"`
	Workers       int     `json:"workers"`
	IdleTimeout   string  `json:"idle_timeout"`
	SpawnSeconds  float64 `json:"time_to_all_ready_s"` // first agent.create sent → last acknowledged (runtime ready)
	SpawnRate     float64 `json:"spawn_rate_agents_per_s"`
	Create        dist    `json:"create_to_ready"`
	PromptSeconds float64 `json:"attach_prompt_all_s"` // attach + one prompt each, until the last turn_end

	Before   scaleSnap `json:"before"`
	Live     scaleSnap `json:"live_idle"`
	Reaped   scaleSnap `json:"after_reaping"`
	LivePer  scalePer  `json:"live_per_agent"`
	ReapPer  scalePer  `json:"reaped_per_agent"`
	ReapSecs float64   `json:"reap_s"` // last turn_end → every runtime stopped

	ChildrenRSSKiB int64   `json:"children_rss_kib"` // runtime children, live
	ChildRSSKiB    float64 `json:"child_rss_kib_mean"`
	// ChildPSSKiB and ChildUSSKiB are the mean child's proportional and
	// unique set size: the shared executable pages divided among the
	// children, and what one child alone holds (childMem).
	ChildPSSKiB float64 `json:"child_pss_kib_mean"`
	ChildUSSKiB float64 `json:"child_uss_kib_mean"`
	MemAvailKiB int64   `json:"mem_available_kib_live"`

	TargetMet *bool    `json:"target_met,omitempty"` // phases of ≥ 500 agents
	Warnings  []string `json:"warnings,omitempty"`

	samples []rssSample // daemon RSS while spawning, for the plot
}

type rssSample struct {
	agents int
	rssKiB int64
}

// runScale: for each agent count, a fresh daemon with a short idle
// timeout; spawn, attach and prompt every agent, snapshot the idle daemon,
// wait for reaping, snapshot again.
func runScale(o *options) (*report, error) {
	def := []int{100, 500, 1000}
	if o.quick {
		def = []int{20, 50}
	}
	as, err := ints(o.agents, def)
	if err != nil {
		return nil, err
	}
	var phases []scalePhase
	var notes []string
	childKiB := float64(scaleChildGuess)
	for _, a := range as {
		avail, err := memAvailableKiB()
		if err != nil {
			return nil, err
		}
		need := int64(float64(a)*childKiB) + scaleMemFloor
		if avail < need {
			notes = append(notes, fmt.Sprintf("stopped before %d agents: MemAvailable %d MiB < %d MiB needed (%d × %.0f MiB per runtime child, twice its PSS, + %d MiB floor)",
				a, avail>>10, need>>10, a, childKiB/1024, scaleMemFloor>>10))
			break
		}
		mark := cleanupMark()
		o.profileTag = fmt.Sprintf("a%d", a)
		ph, err := scaleRun(o, a)
		runCleanupsFrom(mark)
		if err != nil {
			return nil, fmt.Errorf("%d agents: %w", a, err)
		}
		if ph.ChildPSSKiB > 0 {
			childKiB = 2 * ph.ChildPSSKiB
		}
		phases = append(phases, ph)
		if ph.Created < a {
			notes = append(notes, fmt.Sprintf("stopped at %d of %d agents: MemAvailable fell under %d MiB", ph.Created, a, scaleMemFloor>>10))
			break
		}
	}
	o.profileTag = ""

	rep := &report{Header: []string{"agents", "spawn/s", "all ready s", "create p50 ms", "create p99 ms", "prompt all s",
		"RSS before MiB", "RSS live MiB", "KiB/agent live", "gor/agent live", "heap KiB/agent", "RSS reaped MiB", "KiB/agent reaped", "gor/agent reaped", "reap s", "child RSS MiB", "child PSS MiB", "child USS MiB"},
		Results: map[string]any{"target": fmt.Sprintf("≥ %d live idle agents with daemon overhead ≤ %d KiB per agent", scaleTargetAgents, scaleTargetKiB), "phases": phases}}
	mib := func(kib int64) string { return f2(float64(kib) / 1024) }
	for _, p := range phases {
		rep.Rows = append(rep.Rows, []string{fmt.Sprint(p.Created), f2(p.SpawnRate), f3(p.SpawnSeconds), f2(p.Create.P50), f2(p.Create.P99), f3(p.PromptSeconds),
			mib(p.Before.RSSKiB), mib(p.Live.RSSKiB), f2(p.LivePer.RSSKiB), f2(p.LivePer.Goroutines), f2(p.LivePer.HeapInuse),
			mib(p.Reaped.RSSKiB), f2(p.ReapPer.RSSKiB), f2(p.ReapPer.Goroutines), f2(p.ReapSecs), f2(p.ChildRSSKiB / 1024), f2(p.ChildPSSKiB / 1024), f2(p.ChildUSSKiB / 1024)})
	}
	evaluated := false
	for _, p := range phases {
		for _, w := range p.Warnings {
			notes = append(notes, fmt.Sprintf("%d agents: %s", p.Agents, w))
		}
		if p.TargetMet != nil {
			evaluated = true
			verdict := "NOT MET"
			if *p.TargetMet {
				verdict = "met"
			}
			notes = append(notes, fmt.Sprintf("target ≥ %d live idle agents at ≤ %d KiB each: %d agents, %s KiB/agent live RSS (%s KiB/agent heap in use) → %s",
				scaleTargetAgents, scaleTargetKiB, p.Created, f2(p.LivePer.RSSKiB), f2(p.LivePer.HeapInuse), verdict))
		}
	}
	if !evaluated {
		notes = append(notes, fmt.Sprintf("target (≥ %d live idle agents at ≤ %d KiB each) not evaluated: no phase reached %d agents", scaleTargetAgents, scaleTargetKiB, scaleTargetAgents))
	}
	rep.Notes = append(notes,
		"per agent = (value − value before spawning) / agents; RSS is VmRSS of shardd alone (not its children), heap is go_memstats_heap_inuse_bytes and goroutines go_goroutines from /metrics",
		fmt.Sprintf("each phase: fresh daemon, agent.create with %d in flight (acknowledged once the runtime is ready: create_to_ready), then attach + `sim: say hi` on shared connections (%d agents each), snapshots %s after the last turn_end (past the runtime's idle trim) and again %s after runtime.idle_timeout reaped every runtime",
			scaleWorkers, scaleAgentsPerConn, scaleIdleSettle, scaleSettle),
		"after reaping, RSS keeps pages the Go runtime has not returned to the OS yet; heap in use is the closer figure for what the daemon still holds",
		"child RSS/PSS/USS MiB: one live idle runtime child (shardd agent --headless), mean: resident pages (shared executable pages included), those pages divided among the children, and what the child alone holds (smaps_rollup)")
	rep.plot = func(dir string) ([]string, error) { return plotScale(dir, phases) }
	return rep, nil
}

// scaleIdle is the runtime.idle_timeout of a phase of a agents: long
// enough that no runtime is reaped before the idle snapshot (spawning and
// prompting at ≥ ~17 agents/s each), short enough not to wait for long.
func scaleIdle(o *options, a int) time.Duration {
	if o.idle > 0 {
		return o.idle
	}
	return 5*time.Second + time.Duration(a)*60*time.Millisecond
}

// snap takes a snapshot of the daemon.
func (d *daemon) snap() (scaleSnap, error) {
	rss, err := d.rssKiB()
	if err != nil {
		return scaleSnap{}, err
	}
	m, err := d.metrics()
	if err != nil {
		return scaleSnap{}, err
	}
	return scaleSnap{RSSKiB: rss, Goroutines: m["go_goroutines"], HeapInuse: m["go_memstats_heap_inuse_bytes"] / 1024,
		Running: m[`shard_agents_by_runtime_state{runtime_state="running"}`],
		Stopped: m[`shard_agents_by_runtime_state{runtime_state="stopped"}`]}, nil
}

func per(s, before scaleSnap, a int) scalePer {
	n := float64(a)
	return scalePer{RSSKiB: float64(s.RSSKiB-before.RSSKiB) / n, Goroutines: (s.Goroutines - before.Goroutines) / n,
		HeapInuse: (s.HeapInuse - before.HeapInuse) / n}
}

// scaleConn is a client connection shared by many agents: its reader hands
// each agent's sync and turn_end to whoever waits for them.
type scaleConn struct {
	c       *client.Conn
	dead    chan struct{} // closed when the connection's events end
	mu      sync.Mutex
	waiters map[string]chan string // agent_id → event types, as they come
}

func newScaleConn(c *client.Conn) *scaleConn {
	sc := &scaleConn{c: c, dead: make(chan struct{}), waiters: make(map[string]chan string)}
	go func() {
		defer close(sc.dead)
		for ev := range c.Events() {
			var typ string
			switch ev.Msg.(type) {
			case *protocol.Sync:
				typ = protocol.TypeSync
			case *protocol.TurnEnd:
				typ = protocol.TypeTurnEnd
			default:
				continue
			}
			sc.mu.Lock()
			ch := sc.waiters[ev.Msg.Head().AgentID]
			sc.mu.Unlock()
			if ch != nil {
				select {
				case ch <- typ:
				default: // nobody waits for this one
				}
			}
		}
	}()
	return sc
}

// watch registers agent id; its syncs and turn_ends arrive on the channel.
func (sc *scaleConn) watch(id string) chan string {
	ch := make(chan string, 8)
	sc.mu.Lock()
	sc.waiters[id] = ch
	sc.mu.Unlock()
	return ch
}

// await waits for an event of type typ on ch.
func (sc *scaleConn) await(ch chan string, typ string) error {
	timeout := time.After(reqTimeout)
	for {
		select {
		case t := <-ch:
			if t == typ {
				return nil
			}
		case <-sc.dead:
			return fmt.Errorf("connection ended waiting for %s: %v", typ, sc.c.Err())
		case <-timeout:
			return fmt.Errorf("no %s within %s", typ, reqTimeout)
		}
	}
}

func scaleRun(o *options, a int) (scalePhase, error) {
	idle := scaleIdle(o, a)
	ph := scalePhase{Agents: a, Workers: scaleWorkers, IdleTimeout: idle.String()}
	d, err := startDaemon(o, []string{"SHARD_RUNTIME_IDLE_TIMEOUT=" + idle.String()})
	if err != nil {
		return ph, err
	}
	ctl, err := d.dial()
	if err != nil {
		return ph, err
	}
	drain(ctl) // orchestrator broadcasts: agent_spawned, status, activity
	nconn := (a + scaleAgentsPerConn - 1) / scaleAgentsPerConn
	conns := make([]*scaleConn, nconn)
	for i := range conns {
		c, err := d.dial()
		if err != nil {
			return ph, err
		}
		conns[i] = newScaleConn(c)
	}
	ph.Connections = nconn + 1
	cwd, err := tempDir()
	if err != nil {
		return ph, err
	}
	time.Sleep(scaleSettle)
	if ph.Before, err = d.snap(); err != nil {
		return ph, err
	}

	// Spawn: a agents, scaleWorkers creates in flight, while sampling the
	// daemon's RSS and the memory left.
	var created, lowMem atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan []rssSample)
	go func() {
		var out []rssSample
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, err := d.rssKiB(); err == nil {
				out = append(out, rssSample{int(created.Load()), rss})
			}
			if avail, err := memAvailableKiB(); err == nil && avail < scaleMemFloor {
				lowMem.Store(1)
			}
			select {
			case <-tick.C:
			case <-stopSampling:
				sampled <- out
				return
			}
		}
	}()
	ids := make([]string, a)
	lat := make([]time.Duration, a)
	errs := make([]error, a)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range scaleWorkers {
		wg.Go(func() {
			for i := range next {
				t := time.Now()
				var data protocol.AgentCreateData
				errs[i] = call(ctl, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd}, &data)
				lat[i] = time.Since(t)
				ids[i] = data.AgentID
				created.Add(1)
			}
		})
	}
	for i := range a {
		if lowMem.Load() != 0 {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	spawn := time.Since(start)
	close(stopSampling)
	ph.samples = <-sampled
	if err := errors.Join(errs...); err != nil {
		return ph, fmt.Errorf("agent.create: %w", err)
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" })
	lat = lat[:len(ids)]
	n := len(ids)
	ph.Created = n
	if n == 0 {
		return ph, errors.New("no agent created")
	}
	ph.SpawnSeconds = spawn.Seconds()
	ph.SpawnRate = float64(n) / spawn.Seconds()
	ph.Create = summarize(lat)

	// Attach and prompt each, wait for every turn to end.
	start = time.Now()
	next = make(chan int)
	errs = make([]error, n)
	for range scaleWorkers {
		wg.Go(func() {
			for i := range next {
				errs[i] = scaleAttachPrompt(conns[i/scaleAgentsPerConn], ids[i])
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	lastTurn := time.Now()
	ph.PromptSeconds = lastTurn.Sub(start).Seconds()
	if err := errors.Join(errs...); err != nil {
		return ph, fmt.Errorf("attach and prompt: %w", err)
	}

	// Idle, every runtime live.
	time.Sleep(scaleIdleSettle)
	if ph.Live, err = d.snap(); err != nil {
		return ph, err
	}
	cm := d.childrenMemKiB()
	ph.ChildrenRSSKiB = cm.RSS
	if cm.N > 0 {
		ph.ChildRSSKiB = float64(cm.RSS) / float64(cm.N)
		ph.ChildPSSKiB = float64(cm.PSS) / float64(cm.N)
		ph.ChildUSSKiB = float64(cm.Private) / float64(cm.N)
	}
	ph.MemAvailKiB, _ = memAvailableKiB()
	if int(ph.Live.Running) != n {
		ph.Warnings = append(ph.Warnings, fmt.Sprintf("only %d of %d runtimes running at the live snapshot (reaped early? raise --idle-timeout above %s)",
			int(ph.Live.Running), n, idle))
	}
	ph.LivePer = per(ph.Live, ph.Before, n)
	if n >= scaleTargetAgents {
		met := int(ph.Live.Running) >= scaleTargetAgents && ph.LivePer.RSSKiB <= scaleTargetKiB
		ph.TargetMet = &met
	}

	// Reaping.
	deadline := lastTurn.Add(idle + time.Minute)
	for {
		m, err := d.metrics()
		if err != nil {
			return ph, err
		}
		if int(m[`shard_agents_by_runtime_state{runtime_state="stopped"}`]) >= n {
			break
		}
		if time.Now().After(deadline) {
			ph.Warnings = append(ph.Warnings, fmt.Sprintf("runtimes not all reaped %s after the idle timeout", time.Minute))
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	ph.ReapSecs = time.Since(lastTurn).Seconds()
	time.Sleep(scaleSettle)
	if ph.Reaped, err = d.snap(); err != nil {
		return ph, err
	}
	ph.ReapPer = per(ph.Reaped, ph.Before, n)
	if o.cpuprofile != "" {
		if err := d.shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "bench scale: %v: its CPU profile may be missing\n", err)
		}
	}
	return ph, nil
}

// scaleAttachPrompt attaches sc to agent id, waits for the sync, prompts
// `sim: say hi` and waits for the turn's end.
func scaleAttachPrompt(sc *scaleConn, id string) error {
	ch := sc.watch(id)
	if err := call(sc.c, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, nil); err != nil {
		return fmt.Errorf("%s: agent.attach: %w", id, err)
	}
	if err := sc.await(ch, protocol.TypeSync); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	if err := prompt(sc.c, id, "sim: say hi"); err != nil {
		return fmt.Errorf("%s: prompt: %w", id, err)
	}
	if err := sc.await(ch, protocol.TypeTurnEnd); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}
