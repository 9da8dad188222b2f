//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The history targets (BENCHMARKS.md): with 1,000,000 finished jobs and
// 100,000 agents in the store, start to ready ≤ 2 s, RSS ≤ the empty-store
// daemon's + 16 MiB, the lists a person looks at ≤ 20 ms p99.
const (
	historyTargetStart = 2.0 // s
	historyTargetRSS   = 16  // MiB over the empty store
	historyTargetP99   = 20  // ms
	// historyTargetJobs is the size the targets are stated for.
	historyTargetJobs = 1_000_000
)

const (
	// historyParents is how many top-level parents the children are
	// spread over (fewer for tiny histories).
	historyParents = 100
	// historyFillWorkers write jobs concurrently, so that the store's
	// group commit batches them.
	historyFillWorkers = 8
	// historySampleHandles is how many job ids and aliases the filler
	// keeps for jobs.show.
	historySampleHandles = 1000
)

// historyPhase is one daemon: on an empty store (Jobs 0) or on a filled
// history.
type historyPhase struct {
	Jobs   int `json:"jobs"`    // finished jobs in the store
	Agents int `json:"agents"`  // agents in the store before the live ones
	Live   int `json:"live"`    // agents created (and running) through the daemon after start
	DBSize int `json:"db_size"` // shard.db bytes after filling

	FillSeconds float64 `json:"fill_s"`
	// StartSeconds: shardd exec'd → its socket answered daemon.status.
	StartSeconds float64 `json:"start_to_ready_s"`
	// JobsReadySeconds: shardd exec'd → its first jobs.list (limit 1)
	// answered. The jobs coordinator reads its jobs once started, while
	// the socket already serves: a jobs command waits for that read.
	JobsReadySeconds float64 `json:"start_to_jobs_list_s"`
	LiveSeconds      float64 `json:"live_create_s"`

	// Settled is the daemon after the live agents were created and it
	// idled historySettle.
	Settled scaleSnap `json:"settled"`
	// RSSOverEmptyMiB is Settled.RSSKiB − the empty-store phase's.
	RSSOverEmptyMiB float64 `json:"rss_over_empty_mib"`

	Lists []historyList `json:"lists"`
}

// historyList is one list's latency over sequential requests.
type historyList struct {
	Name  string `json:"name"`
	Bytes int    `json:"response_bytes"` // the last response's data
	Items int    `json:"items"`          // agents or jobs in the last response
	Lat   dist   `json:"latency"`
	// Capped: the time budget ended the sampling before --samples.
	Capped bool `json:"capped,omitempty"`
	// TimedOut: a request went unanswered for historyReqTimeout; the
	// sampling of this list stopped there (Lat holds the answered ones).
	TimedOut bool `json:"timed_out,omitempty"`
}

// historyReqTimeout bounds one list request: today's daemon builds every
// list from everything it holds, which takes long at a million jobs.
const historyReqTimeout = 2 * time.Minute

// historySettle is the pause before the memory snapshot.
const historySettle = 3 * time.Second

// runHistory: for the empty store and each history size, fill a fresh
// home through the store package, start shardd on it, time it to ready,
// create the live agents, snapshot its memory and time the lists.
// defaultRunsPerAgent is how many jobs each child agent ran: one
// subagent.create (which made the agent), then relaunches. 1,000,000 jobs
// make 100,000 child agents, the target's shape; --runs-per-agent 1 gives
// that many agents with a tenth of the jobs.
const defaultRunsPerAgent = 10

// historyRunsPerAgent is --runs-per-agent, or defaultRunsPerAgent.
func (o *options) historyRunsPerAgent() int {
	if o.runsPerAgent > 0 {
		return o.runsPerAgent
	}
	return defaultRunsPerAgent
}

func runHistory(o *options) (*report, error) {
	historyRunsPerAgent := o.historyRunsPerAgent()
	def := []int{1000, 10000, 100000}
	if o.quick {
		def = []int{1000}
	}
	sizes, err := ints(o.history, def)
	if err != nil {
		return nil, err
	}
	live := pick(o.live, 100, 3, o.quick)
	samples := pick(o.samples, 300, 50, o.quick)
	budget := 30 * time.Second
	if o.quick {
		budget = 5 * time.Second
	}
	o.readyTimeout = 10 * time.Minute // today's daemon reads every record before it serves
	var phases []historyPhase
	for _, n := range append([]int{0}, sizes...) {
		mark := cleanupMark()
		o.profileTag = fmt.Sprintf("h%d", n)
		fmt.Fprintf(os.Stderr, "bench history: %d jobs …\n", n)
		ph, err := historyRun(o, n, live, samples, budget)
		runCleanupsFrom(mark)
		if err != nil {
			return nil, fmt.Errorf("%d jobs: %w", n, err)
		}
		if len(phases) > 0 {
			ph.RSSOverEmptyMiB = float64(ph.Settled.RSSKiB-phases[0].Settled.RSSKiB) / 1024
		}
		// The phase's figures now, so that a long run shows them as it goes.
		line := fmt.Sprintf("bench history: %d jobs: fill %.1f s, start %.3f s (jobs.list %.3f s), RSS %.1f MiB, heap %.1f MiB",
			n, ph.FillSeconds, ph.StartSeconds, ph.JobsReadySeconds, float64(ph.Settled.RSSKiB)/1024, ph.Settled.HeapInuse/1024)
		for _, l := range ph.Lists {
			line += fmt.Sprintf(", %s p99 %.2f ms (n %d)", l.Name, l.Lat.P99, l.Lat.N)
		}
		fmt.Fprintln(os.Stderr, line)
		phases = append(phases, ph)
	}
	o.profileTag = ""

	names := []string{} // every list any phase timed, in order
	for _, p := range phases {
		for _, l := range p.Lists {
			if !slices.Contains(names, l.Name) {
				names = append(names, l.Name)
			}
		}
	}
	rep := &report{Header: append([]string{"jobs", "agents", "fill s", "db MiB", "start s", "jobs.list ready s", "RSS MiB", "over empty MiB", "heap MiB", "goroutines"},
		func() []string {
			var h []string
			for _, n := range names {
				h = append(h, n+" p50/p99 ms")
			}
			return h
		}()...),
		Results: map[string]any{
			"target": fmt.Sprintf("with %d finished jobs and %d agents: start to ready ≤ %g s, RSS ≤ empty-store daemon + %d MiB and flat, lists p99 ≤ %d ms",
				historyTargetJobs, historyTargetJobs/historyRunsPerAgent, historyTargetStart, historyTargetRSS, historyTargetP99),
			"live_agents": live, "phases": phases},
	}
	mib := func(kib float64) string { return f2(kib / 1024) }
	for _, p := range phases {
		row := []string{fmt.Sprint(p.Jobs), fmt.Sprint(p.Agents), f2(p.FillSeconds), f2(float64(p.DBSize) / (1 << 20)), f3(p.StartSeconds), f3(p.JobsReadySeconds),
			mib(float64(p.Settled.RSSKiB)), f2(p.RSSOverEmptyMiB), mib(p.Settled.HeapInuse), f0(p.Settled.Goroutines)}
		for _, n := range names {
			cell := "–"
			for _, l := range p.Lists {
				if l.Name == n && l.Lat.N > 0 {
					cell = f2(l.Lat.P50) + " / " + f2(l.Lat.P99)
				}
				if l.Name == n && l.TimedOut {
					cell += fmt.Sprintf(" (> %s)", historyReqTimeout)
				}
			}
			row = append(row, cell)
		}
		rep.Rows = append(rep.Rows, row)
	}
	var notes []string
	for _, p := range phases {
		if p.Jobs != historyTargetJobs {
			continue
		}
		worst := 0.0
		for _, l := range p.Lists {
			worst = max(worst, l.Lat.P99)
			if l.TimedOut {
				worst = max(worst, float64(historyReqTimeout.Milliseconds()))
			}
		}
		met := p.StartSeconds <= historyTargetStart && p.RSSOverEmptyMiB <= historyTargetRSS && worst <= historyTargetP99
		verdict := "NOT MET"
		if met {
			verdict = "met"
		}
		notes = append(notes, fmt.Sprintf("target at %d jobs: start %.3f s (≤ %g), RSS +%.1f MiB over empty (≤ %d), worst list p99 %.2f ms (≤ %d) → %s",
			p.Jobs, p.StartSeconds, historyTargetStart, p.RSSOverEmptyMiB, historyTargetRSS, worst, historyTargetP99, verdict))
	}
	for _, p := range phases {
		for _, l := range p.Lists {
			if l.TimedOut {
				notes = append(notes, fmt.Sprintf("%d jobs: %s went unanswered for %s (a response over the client's %d MiB record limit never arrives: the client drops it); its sampling stopped after %d answers",
					p.Jobs, l.Name, historyReqTimeout, protocol.DefaultMaxRecord>>20, l.Lat.N))
			}
			if l.Capped {
				notes = append(notes, fmt.Sprintf("%d jobs: %s sampled %d times, not %d: the %s budget per list ran out", p.Jobs, l.Name, l.Lat.N, samples, budget))
			}
		}
	}
	rep.Notes = append(notes,
		fmt.Sprintf("each phase: a fresh home filled through the store package (fsync off; jobs of one finished run each: every child agent's first job a create, its next %d relaunches; children spread over ≤ %d stopped parents), then shardd started on it (fsync %v), %d live agents created through agent.create, %s idle, then a memory snapshot and sequential requests of each list on one connection (≤ %d each, ≤ %s per list)",
			historyRunsPerAgent-1, historyParents, !o.noSync, live, historySettle, samples, budget),
		"start to ready: shardd exec'd → the socket completed a hello (polled every 20 ms) and answered daemon.status; jobs.list ready: → then its first jobs.list (limit 1) answered, once the jobs coordinator has read the store (it reads after the socket serves)",
		"RSS is VmRSS of shardd alone; heap is go_memstats_heap_inuse_bytes and goroutines go_goroutines from /metrics",
		"lists: agent.list active (limit 200), since a week ago (limit 200) and a first page of every agent (limit 200); jobs.list of one parent (limit 20) and of all (limit 20); jobs.show of a random job id and of a random child's alias (unique across parents)")
	rep.plot = func(dir string) ([]string, error) { return plotHistory(dir, phases) }
	return rep, nil
}

// historyFill is what the filler leaves for the measurements.
type historyFill struct {
	agents  int
	parent  string   // a parent with its share of the jobs
	jobIDs  []string // a sample of job ids
	aliases []string // a sample of child aliases
}

// historyRun measures one daemon on a store of n finished jobs.
func historyRun(o *options, n, live, samples int, budget time.Duration) (historyPhase, error) {
	ph := historyPhase{Jobs: n}
	dir, err := tempDir()
	if err != nil {
		return ph, err
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return ph, err
	}
	cwd := filepath.Join(dir, "cwd")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return ph, err
	}
	var fill historyFill
	if n > 0 {
		t0 := time.Now()
		if fill, err = fillHistory(filepath.Join(home, "shard.db"), cwd, n, o.historyRunsPerAgent()); err != nil {
			return ph, fmt.Errorf("fill: %w", err)
		}
		ph.FillSeconds = time.Since(t0).Seconds()
		ph.Agents = fill.agents
		if fi, err := os.Stat(filepath.Join(home, "shard.db")); err == nil {
			ph.DBSize = int(fi.Size())
		}
	}

	t0 := time.Now()
	d, err := startDaemonAt(o, home, nil)
	if err != nil {
		return ph, err
	}
	ctl, err := d.dial()
	if err != nil {
		return ph, err
	}
	if err := call(ctl, &protocol.DaemonStatus{Header: protocol.Header{Type: protocol.TypeDaemonStatus}}, nil); err != nil {
		return ph, fmt.Errorf("daemon.status: %w", err)
	}
	ph.StartSeconds = time.Since(t0).Seconds()
	ctx, cancel := context.WithTimeout(context.Background(), historyReqTimeout)
	err = ctl.Call(ctx, &protocol.JobsList{Header: protocol.Header{Type: protocol.TypeJobsList}, Limit: 1}, nil)
	cancel()
	if err != nil {
		return ph, fmt.Errorf("first jobs.list: %w", err)
	}
	ph.JobsReadySeconds = time.Since(t0).Seconds()
	drain(ctl)

	// The live agents: created through the daemon, each with a running
	// runtime.
	t0 = time.Now()
	if err := historyLive(d, cwd, live); err != nil {
		return ph, err
	}
	ph.LiveSeconds = time.Since(t0).Seconds()
	ph.Live = live
	time.Sleep(historySettle)
	if ph.Settled, err = d.snap(); err != nil {
		return ph, err
	}

	// The lists, on a connection of their own that reads no events.
	c, err := d.dial()
	if err != nil {
		return ph, err
	}
	rng := rand.New(rand.NewPCG(uint64(n), 35))
	type list struct {
		name string
		msg  func() protocol.Typed
	}
	// The lists a person looks at, as the page and shardctl ask them: the
	// overview's live agents and those of the last 7 days (a page of 200,
	// web/assets/js/store.js), a first page of every agent, a parent's
	// jobs and everyone's (a page of 20), one job by id and by alias.
	// Unpaged lists of everything are not timed: at a million jobs one
	// answer is over the record limit (docs/protocol.md §2).
	agentsPage := func(m protocol.AgentList) func() protocol.Typed {
		return func() protocol.Typed {
			m.Header = protocol.Header{Type: protocol.TypeAgentList}
			return &m
		}
	}
	lists := []list{
		{"agent.list active", agentsPage(protocol.AgentList{Active: true, Limit: 200})},
		{"agent.list recent", agentsPage(protocol.AgentList{SinceMs: time.Now().Add(-7 * 24 * time.Hour).UnixMilli(), Limit: 200})},
		{"agent.list limit 200", agentsPage(protocol.AgentList{Limit: 200})},
	}
	if n > 0 {
		lists = append(lists,
			list{"jobs.list parent limit 20", func() protocol.Typed {
				return &protocol.JobsList{Header: protocol.Header{Type: protocol.TypeJobsList}, ParentAgentID: fill.parent, Limit: 20}
			}},
			list{"jobs.list limit 20", func() protocol.Typed {
				return &protocol.JobsList{Header: protocol.Header{Type: protocol.TypeJobsList}, Limit: 20}
			}},
			list{"jobs.show id", func() protocol.Typed {
				return &protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: fill.jobIDs[rng.IntN(len(fill.jobIDs))]}
			}},
			list{"jobs.show alias", func() protocol.Typed {
				return &protocol.JobsShow{Header: protocol.Header{Type: protocol.TypeJobsShow}, Handle: fill.aliases[rng.IntN(len(fill.aliases))]}
			}})
	}
	for _, l := range lists {
		hl, err := historyTime(c, l.name, l.msg, samples, budget)
		if err != nil {
			return ph, err
		}
		ph.Lists = append(ph.Lists, hl)
	}
	if o.cpuprofile != "" {
		if err := d.shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "bench history: %v: its CPU profile may be missing\n", err)
		}
	}
	return ph, nil
}

// historyTime sends msg() up to samples times, one at a time, within
// budget, and summarizes the round trips.
func historyTime(c *client.Conn, name string, msg func() protocol.Typed, samples int, budget time.Duration) (historyList, error) {
	hl := historyList{Name: name}
	var lat []time.Duration
	end := time.Now().Add(budget)
	for i := range samples {
		if i > 0 && time.Now().After(end) {
			hl.Capped = true
			break
		}
		var raw json.RawMessage
		t := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), historyReqTimeout)
		err := c.Call(ctx, msg(), &raw)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			hl.TimedOut = true
			break
		}
		if err != nil {
			return hl, fmt.Errorf("%s: %w", name, err)
		}
		lat = append(lat, time.Since(t))
		hl.Bytes = len(raw)
		if i == 0 {
			hl.Items = historyItems(raw)
		}
	}
	hl.Lat = summarize(lat)
	return hl, nil
}

// historyItems counts the agents or jobs of a list response (1 for a
// single job).
func historyItems(raw json.RawMessage) int {
	var v struct {
		Agents []json.RawMessage `json:"agents"`
		Jobs   []json.RawMessage `json:"jobs"`
		JobID  string            `json:"job_id"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return 0
	}
	if v.JobID != "" {
		return 1
	}
	return len(v.Agents) + len(v.Jobs)
}

// historyLive creates live agents through the daemon, scaleWorkers at a
// time; each is acknowledged once its runtime is ready.
func historyLive(d *daemon, cwd string, live int) error {
	c, err := d.dial()
	if err != nil {
		return err
	}
	drain(c)
	next := make(chan int)
	errs := make([]error, live)
	var wg sync.WaitGroup
	for range scaleWorkers {
		wg.Go(func() {
			for i := range next {
				errs[i] = call(c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd}, nil)
			}
		})
	}
	for i := range live {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("agent.create: %w", err)
	}
	return nil
}

// fillHistory writes n finished jobs through the store package into a new
// store at path (fsync off): ⌈n/historyRunsPerAgent⌉ child agents, each
// made by a subagent.create job and relaunched for the rest of its jobs,
// one finished run per job (9 in 10 completed, the rest failed or
// cancelled), spread over up to historyParents stopped parents. Records
// are shaped as the jobs coordinator writes them (jobs/commands.go).
func fillHistory(path, cwd string, n, historyRunsPerAgent int) (historyFill, error) {
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		return historyFill{}, err
	}
	children := (n + historyRunsPerAgent - 1) / historyRunsPerAgent
	nparents := min(historyParents, children)
	// History starts a year back, a job every few seconds.
	base := time.Now().Add(-365 * 24 * time.Hour).UnixMilli()
	step := max(int64(365*24*3600*1000)/int64(n), 1)
	parents := make([]string, nparents)
	lp := &store.LaunchPolicy{MaxTasks: 8, MaxDepth: 2}
	for i := range parents {
		parents[i] = ids.New("agent")
		if err := st.CreateAgent(store.Agent{AgentID: parents[i], SessionID: ids.New("sess"), Cwd: cwd,
			Name: fmt.Sprintf("lead-%d", i), CreatedAt: base, LaunchPolicy: lp}); err != nil {
			st.Close()
			return historyFill{}, err
		}
	}
	task := strings.Repeat("Refactor the storage layer and report what changed. ", 4)
	final := strings.Repeat("Done: the storage layer now batches its commits. ", 6)
	every := max(1, children/historySampleHandles)
	var (
		mu      sync.Mutex
		jobIDs  []string
		aliases []string
		wg      sync.WaitGroup
	)
	errs := make([]error, historyFillWorkers)
	for w := range historyFillWorkers {
		wg.Go(func() {
			for c := w; c < children; c += historyFillWorkers {
				parent := parents[c%nparents]
				alias := fmt.Sprintf("hist-%d", c) // unique across parents: jobs.show resolves it
				norm := view.NormalizeAlias(alias)
				agentID := ids.New("agent")
				name := fmt.Sprintf("task-%d", c%7)
				for k := range historyRunsPerAgent {
					i := c*historyRunsPerAgent + k
					if i >= n {
						break
					}
					at := base + int64(i)*step
					r := store.Run{RunID: ids.New("run"), Name: name, AgentID: agentID, Alias: alias, Task: task,
						State: protocol.RunCompleted, QueuedAt: at, StartedAt: at + 50, Deadline: at + 1_800_050,
						EndedAt: at + 45_000, TimeoutMs: 1_800_000, ExitStatus: "exited 0"}
					switch i % 20 {
					case 7:
						r.State, r.Error = protocol.RunFailed, "provider error: 529 overloaded"
					case 13:
						r.State, r.StopRequestedAt, r.StopStage = protocol.RunCancelled, at+30_000, "abort"
					default:
						r.FinalText, r.Usage = final, &protocol.RunUsage{Input: 12_000, Output: 900}
					}
					j := store.Job{JobID: ids.New("job"), ParentAgentID: parent, Strategy: protocol.StrategySingle,
						CreatedAt: at, EndedAt: r.EndedAt, Runs: []store.Run{r}}
					var agents []store.Agent
					var al map[string]string
					if k == 0 {
						agents = []store.Agent{{AgentID: agentID, SessionID: ids.New("sess"), Cwd: cwd, Name: name,
							SystemPrompt: "You are " + alias + ", a subagent of " + parent + ".", ParentAgentID: parent,
							CreatedAt: at, Depth: 1, LaunchPolicy: lp, Alias: alias, DefinitionName: name,
							DisplayName: view.DisplayName(name, alias)}}
						al = map[string]string{norm: agentID}
					}
					if _, err := st.CreateJob(j, agents, al); err != nil {
						errs[w] = err
						return
					}
					if k == 0 && c%every == 0 {
						mu.Lock()
						jobIDs = append(jobIDs, j.JobID)
						aliases = append(aliases, alias)
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	cerr := st.Close()
	if err := errors.Join(append(errs, cerr)...); err != nil {
		return historyFill{}, err
	}
	return historyFill{agents: nparents + children, parent: parents[0], jobIDs: jobIDs, aliases: aliases}, nil
}

// plotHistory draws the daemon's settled RSS and Go heap, and its start
// to ready, against the finished jobs in its store (log x), beside the
// empty-store daemon and the targets: history-rss.png and
// history-start.png.
func plotHistory(dir string, phases []historyPhase) ([]string, error) {
	if len(phases) < 2 || phases[0].Jobs != 0 {
		return nil, nil // no history size measured
	}
	empty, hist := phases[0], phases[1:]
	lo, hi := float64(hist[0].Jobs), float64(hist[len(hist)-1].Jobs)
	hi = max(hi, lo*10)
	mib := func(kib float64) float64 { return kib / 1024 }
	newPlot := func(title, y string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "finished jobs in the store (log; agents = jobs / 10 + parents)"
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, decadeTicks{}
		p.X.Min, p.X.Max = lo/1.5, hi*1.5
		p.Y.Label.Text = y
		p.Y.Min = 0
		p.Legend.Top, p.Legend.Left = true, true
		p.Add(plotter.NewGrid())
		return p
	}
	line := func(p *plot.Plot, i int, label string, xys plotter.XYs) error {
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		p.Add(l, pts)
		p.Legend.Add(label, l, pts)
		return nil
	}
	level := func(p *plot.Plot, label string, y float64, c color.Color, dashes []vg.Length) error {
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: y}, {X: p.X.Max, Y: y}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = c, dashes
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}
	red := color.RGBA{R: 0xd0, A: 0xff}
	dash := []vg.Length{vg.Points(4), vg.Points(3)}

	rss := newPlot(fmt.Sprintf("history: shardd memory vs finished jobs (%d live agents, runtimes excluded)", empty.Live), "MiB")
	var r, h plotter.XYs
	for _, p := range hist {
		r = append(r, plotter.XY{X: float64(p.Jobs), Y: mib(float64(p.Settled.RSSKiB))})
		h = append(h, plotter.XY{X: float64(p.Jobs), Y: mib(p.Settled.HeapInuse)})
	}
	if err := line(rss, 0, "RSS", r); err != nil {
		return nil, err
	}
	if err := line(rss, 1, "Go heap in use", h); err != nil {
		return nil, err
	}
	base := mib(float64(empty.Settled.RSSKiB))
	if err := level(rss, fmt.Sprintf("RSS, empty store (%.1f MiB)", base), base, color.Gray{Y: 0x40}, dash); err != nil {
		return nil, err
	}
	if err := level(rss, fmt.Sprintf("target: empty + %d MiB, flat", historyTargetRSS), base+historyTargetRSS, red, dash); err != nil {
		return nil, err
	}

	rss.Y.Max = max(rss.Y.Max, base+historyTargetRSS) * 1.08

	start := newPlot("history: shardd start to ready vs finished jobs", "seconds")
	var s plotter.XYs
	for _, p := range hist {
		s = append(s, plotter.XY{X: float64(p.Jobs), Y: p.StartSeconds})
	}
	if err := line(start, 0, "start to ready (daemon.status answered)", s); err != nil {
		return nil, err
	}
	var js plotter.XYs
	for _, p := range hist {
		js = append(js, plotter.XY{X: float64(p.Jobs), Y: p.JobsReadySeconds})
	}
	if err := line(start, 1, "start to first jobs.list answered", js); err != nil {
		return nil, err
	}
	if err := level(start, fmt.Sprintf("empty store (%.3f s)", empty.StartSeconds), empty.StartSeconds, color.Gray{Y: 0x40}, dash); err != nil {
		return nil, err
	}
	if err := level(start, fmt.Sprintf("target ≤ %g s at %d jobs", historyTargetStart, historyTargetJobs), historyTargetStart, red, dash); err != nil {
		return nil, err
	}

	start.Y.Max = max(start.Y.Max, historyTargetStart) * 1.08

	files := []string{filepath.Join(dir, "history-rss.png"), filepath.Join(dir, "history-start.png")}
	for i, p := range []*plot.Plot{rss, start} {
		if err := p.Save(plotW, plotH, files[i]); err != nil {
			return nil, err
		}
	}
	return files, nil
}
