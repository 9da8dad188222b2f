//go:build linux

package faults

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

var (
	soakRestartFlag = flag.Duration("soak-restart", 15*time.Minute, "TestSoak: SIGKILL and restart shardd this often")
	soakSampleFlag  = flag.Duration("soak-sample", 10*time.Second, "TestSoak: how often RSS, goroutines and open fds are sampled")
	soakHeapFlag    = flag.String("soak-heap", "", "TestSoak: the last daemon writes its heap profile here when the soak stops it (SHARD_HEAPPROFILE)")
	soakWorkersFlag = flag.String("soak-workers", "", "TestSoak: comma-separated workers to run (jobs, prompts, kills, slow, storms, malformed; default all), to find which one a growth comes from")
	soakCSVFlag     = flag.String("soak-csv", "", "TestSoak: write every sample to this CSV file (elapsed_s, pid, RSS, goroutines, fds, anonymous and file-backed RSS, heap in use)")
	// The soak runs with retention on, as a daemon kept for months would:
	// its memory must follow live work, not the history it removes.
	soakRetentionFlag = flag.Duration("soak-retention", 10*time.Minute, "TestSoak: the daemon's jobs.retention (0: keep every job)")
)

// sample is one reading of the daemon's resources.
type sample struct {
	at         time.Time
	rss        float64 // bytes
	goroutines float64
	fds        float64
	// Recorded for the CSV, not judged: what RSS is made of.
	anon, file, heap float64
}

// growthRule says when a resource grows without bound: over one daemon
// lifetime, the median of the last window of samples exceeds factor times
// the median of the first window (after warm-up) plus slack. Medians make
// a single spike (a flood, a storm) irrelevant; the generous factor and
// slack leave room for caches that fill once and for the state a long run
// legitimately keeps (job records, the coordinator's index).
type growthRule struct {
	name   string
	get    func(sample) float64
	factor float64
	slack  float64
}

var growthRules = []growthRule{
	{name: "RSS", get: func(s sample) float64 { return s.rss }, factor: 1.5, slack: 64 << 20},
	{name: "goroutines", get: func(s sample) float64 { return s.goroutines }, factor: 1.5, slack: 100},
	{name: "open fds", get: func(s sample) float64 { return s.fds }, factor: 1.5, slack: 64},
}

// checkGrowth applies the growth rules to the samples of one daemon
// lifetime: the first warmup of them is skipped, then the first and last
// window (of equal duration) are compared. It returns the violations, or
// nil when the lifetime was too short to judge (fewer than three windows).
func checkGrowth(samples []sample, warmup, window time.Duration) []string {
	if len(samples) == 0 {
		return nil
	}
	start := samples[0].at.Add(warmup)
	end := samples[len(samples)-1].at
	if end.Sub(start) < 3*window {
		return nil
	}
	var first, last []sample
	for _, s := range samples {
		switch {
		case s.at.Before(start):
		case s.at.Before(start.Add(window)):
			first = append(first, s)
		case !s.at.Before(end.Add(-window)):
			last = append(last, s)
		}
	}
	var out []string
	for _, r := range growthRules {
		a, b := median(first, r.get), median(last, r.get)
		if b > r.factor*a+r.slack {
			out = append(out, fmt.Sprintf("%s grew from a median of %.0f to %.0f (limit %.1f× + %.0f)", r.name, a, b, r.factor, r.slack))
		}
	}
	return out
}

func median(ss []sample, get func(sample) float64) float64 {
	if len(ss) == 0 {
		return 0
	}
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = get(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// TestGrowthRule pins the soak's definition of unbounded growth.
func TestGrowthRule(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000_000, 0)
	series := func(n int, f func(i int) sample) []sample {
		out := make([]sample, n)
		for i := range out {
			out[i] = f(i)
			out[i].at = t0.Add(time.Duration(i) * time.Second)
		}
		return out
	}
	flat := series(100, func(i int) sample { return sample{rss: 100 << 20, goroutines: 50, fds: 30} })
	spiky := series(100, func(i int) sample {
		s := sample{rss: 100 << 20, goroutines: 50, fds: 30}
		if i%10 == 0 { // a storm now and then
			s.rss, s.goroutines, s.fds = 400<<20, 900, 300
		}
		return s
	})
	leak := series(100, func(i int) sample {
		return sample{rss: float64(100<<20 + i*(4<<20)), goroutines: float64(50 + 10*i), fds: float64(30 + 2*i)}
	})
	for _, c := range []struct {
		name    string
		samples []sample
		want    int
	}{
		{"flat", flat, 0},
		{"spikes", spiky, 0},
		{"leak", leak, 3},
		{"too short to judge", leak[:30], 0},
	} {
		got := checkGrowth(c.samples, 10*time.Second, 20*time.Second)
		if len(got) != c.want {
			t.Errorf("%s: %d violations %q, want %d", c.name, len(got), got, c.want)
		}
	}
	// Across lifetimes: each lifetime's last window against the first's.
	window := 20 * time.Second
	settled := lastWindow(flat, window)
	if len(settled) != 21 || !settled[0].at.Equal(flat[79].at) {
		t.Fatalf("lastWindow kept %d samples from %v", len(settled), settled[0].at)
	}
	higher := lastWindow(series(100, func(int) sample { return sample{rss: 300 << 20, goroutines: 50, fds: 30} }), window)
	for _, c := range []struct {
		name      string
		lifetimes [][]sample
		want      int
	}{
		{"one lifetime judges nothing", [][]sample{settled}, 0},
		{"flat across restarts", [][]sample{settled, settled, settled}, 0},
		{"history reloaded at each restart", [][]sample{settled, settled, higher}, 1},
	} {
		if got := acrossLifetimes(c.lifetimes); len(got) != c.want {
			t.Errorf("%s: %d violations %q, want %d", c.name, len(got), got, c.want)
		}
	}
}

// soak is the state of TestSoak shared by its workers.
type soak struct {
	home    string
	socket  string
	parents []string
	direct  []string
	cur     atomic.Pointer[daemon]

	mu    sync.Mutex
	acked map[string]protocol.SubagentCreateData
	// ackedAt is when each acknowledged job was acknowledged: retention
	// may remove it only once it has been finished for longer than
	// -soak-retention, so not before then (removable).
	ackedAt  map[string]time.Time
	children map[string][]string // parent → its children
	errs     []string
	counts   map[string]int
}

func (s *soak) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
}

func (s *soak) count(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[what]++
}

// dial connects to whichever daemon runs now (nil while none does).
func (s *soak) dial(hook func(*client.Conn) func(client.Event)) *client.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, s.socket)
	if err != nil {
		return nil
	}
	var h func(client.Event)
	if hook != nil {
		h = hook(c)
	}
	recordWith(c, h)
	return c
}

// check returns err as a failure unless it is the daemon going away (a
// transport error) or one of the codes allowed.
func (s *soak) check(what string, err error, allowed ...protocol.ErrorCode) {
	if err == nil {
		return
	}
	if pe := protoErr(err); pe != nil && !slices.Contains(allowed, pe.Code) {
		s.fail("%s: %v", what, err)
	}
}

var soakFlags = []string{
	"--jobs.max-active", "8", "--jobs.max-active-per-parent", "4", "--runtime.idle-timeout", "30s",
	"--shutdown.timeout", "2s", "--kill.abort-grace", "500ms", "--kill.term-grace", "500ms",
}

// TestSoak runs a mixed workload for -soak (skipped without it): subagent
// jobs created, relaunched and stopped; prompts; runtimes killed at random;
// slow consumers; reconnect bursts; malformed frames; and a SIGKILL of the
// daemon every -soak-restart, after which the invariants of
// TestKillDaemonUnderLoad are checked. A sampler reads the daemon's RSS,
// goroutines (go_goroutines on /metrics) and open fds every -soak-sample,
// and each daemon lifetime must pass the growth rule (see growthRule).
func TestSoak(t *testing.T) {
	if *soakFlag <= 0 {
		testhost.Skip(t, "opt-in: runs only with -soak <duration>, e.g. go test ./faults -run Soak -soak 2h -timeout 3h -v")
	}
	rng := rand.New(rand.NewPCG(uint64(seed(t)), 9))
	deadline := time.Now().Add(*soakFlag)
	restartEvery := min(*soakRestartFlag, *soakFlag)
	window := min(max(restartEvery/6, 30*time.Second), 5*time.Minute)
	warmup := window

	home := newHome(t)
	d := startDaemon(t, home, soakOpts())
	s := &soak{home: home, socket: d.socket(), acked: map[string]protocol.SubagentCreateData{},
		ackedAt: map[string]time.Time{}, children: map[string][]string{}, counts: map[string]int{}}
	s.cur.Store(d)
	{
		c := d.dial()
		record(c)
		for range 2 {
			id, _ := createAgent(t, c)
			s.parents = append(s.parents, id)
		}
		for range 2 {
			id, _ := createAgent(t, c)
			s.direct = append(s.direct, id)
		}
		c.Close()
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	workers := []soakWorker{{"jobs", s.jobs}, {"jobs", s.jobs}, {"prompts", s.prompts}, {"kills", s.runtimeKills},
		{"slow", s.slowConsumers}, {"storms", s.storms}, {"malformed", s.malformed}}
	var only []string
	if *soakWorkersFlag != "" {
		only = strings.Split(*soakWorkersFlag, ",")
		for _, name := range only {
			if !slices.ContainsFunc(workers, func(w soakWorker) bool { return w.name == name }) {
				t.Fatalf("-soak-workers: no worker %q (jobs, prompts, kills, slow, storms, malformed)", name)
			}
		}
	}
	for i, wk := range workers {
		r := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		if only != nil && !slices.Contains(only, wk.name) {
			continue
		}
		wg.Go(func() { wk.run(ctx, r) })
	}
	stopWorkers := func() {
		cancel()
		wg.Wait()
	}
	defer stopWorkers()

	var samples []sample
	// lifetimes holds each ended daemon lifetime's last window of samples:
	// with retention on, the history a daemon starts from stops growing,
	// and so must what it settles at (checked at the end).
	var lifetimes [][]sample
	born := time.Now()
	began := born
	out := soakCSV(t)
	// inv counts the invariants checked, for the soak's record.
	inv := map[string]int{}
	lastCheck := time.Now()
	judge := func(d *daemon) {
		if v := checkGrowth(samples, warmup, window); len(v) > 0 {
			t.Fatalf("shardd (pid %d, up %s) grows without bound:\n%s", d.pid(), time.Since(born).Round(time.Second), strings.Join(v, "\n"))
		}
		if len(samples) > 0 {
			a, b := samples[0], samples[len(samples)-1]
			t.Logf("lifetime of pid %d (%s): RSS %d→%d MiB, goroutines %.0f→%.0f, fds %.0f→%.0f; %d samples",
				d.pid(), time.Since(born).Round(time.Second), int64(a.rss)>>20, int64(b.rss)>>20, a.goroutines, b.goroutines, a.fds, b.fds, len(samples))
		}
	}
	for {
		time.Sleep(*soakSampleFlag)
		d := s.cur.Load()
		if d.exited() {
			t.Fatalf("shardd exited on its own: %v", d.State())
		}
		m, err := d.metrics()
		rss, err2 := rssBytes(d.pid())
		fds, err3 := openFDs(d.pid())
		if err = errors.Join(err, err2, err3); err != nil {
			t.Fatalf("sample: %v", err)
		}
		anon, _ := statusBytes(d.pid(), "RssAnon")
		file, _ := statusBytes(d.pid(), "RssFile")
		samples = append(samples, sample{at: time.Now(), rss: float64(rss), goroutines: m["go_goroutines"], fds: float64(fds),
			anon: float64(anon), file: float64(file), heap: m["go_memstats_heap_inuse_bytes"]})
		out(samples[len(samples)-1], d.pid(), began)
		s.mu.Lock()
		errs := s.errs
		s.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("workload errors:\n%s", strings.Join(errs, "\n"))
		}
		if time.Since(lastCheck) > time.Minute {
			lastCheck = time.Now()
			c := d.dial()
			record(c)
			var chk protocol.DaemonCheckData
			call(t, c, &protocol.DaemonCheck{Header: hdr(protocol.TypeDaemonCheck, "")}, &chk)
			if !chk.StoreOK {
				t.Fatalf("daemon.check: %s", chk.StoreError)
			}
			inv["daemon.check store ok"]++
			c.Close()
		}
		if time.Now().After(deadline) {
			judge(d)
			inv["lifetimes within the growth rule"]++
			break
		}
		if time.Since(born) < restartEvery {
			continue
		}
		// A crash, under load, and the restart rules.
		judge(d)
		inv["lifetimes within the growth rule"]++
		before := slices.DeleteFunc(procsWithEnv(d.homeEnv()), func(p procInfo) bool { return p.pid == d.pid() })
		d.sigkill()
		s.mu.Lock()
		acked, ackedAt := cloneMap(s.acked), cloneMap(s.ackedAt)
		s.mu.Unlock()
		onDisk := map[string]store.Job{}
		for _, j := range offlineJobs(t, home) {
			onDisk[j.JobID] = j
		}
		killedAt := time.Now()
		for id, job := range acked {
			if _, ok := onDisk[id]; !ok && removable(ackedAt[id], killedAt) {
				inv["acknowledged jobs removed by retention"]++
				continue
			}
			checkAcked(t, 0, job, onDisk[id])
			inv["acknowledged jobs found durable"]++
		}
		inv["SIGKILL restarts"]++
		d = startDaemon(t, home, soakOpts())
		s.cur.Store(d)
		waitGone(t, "processes of the killed daemon", before)
		if st := d.strays(); len(st) > 0 {
			t.Fatalf("processes of the home outside the new daemon:%s", describe(st))
		}
		// The restarted daemon sweeps at start: the jobs it may remove
		// while they are checked (finished within a minute of the cut-off)
		// are left out; every unfinished one is checked.
		kept := map[string]store.Job{}
		for id, j := range onDisk {
			if j.EndedAt == 0 || *soakRetentionFlag <= 0 || time.UnixMilli(j.EndedAt).After(time.Now().Add(time.Minute-*soakRetentionFlag)) {
				kept[id] = j
			}
		}
		checkReconciled(t, 0, d, kept)
		inv["jobs reconciled after a restart"] += len(kept)
		inv["stray-process checks"]++
		t.Logf("restarted after SIGKILL: %d jobs on disk, %d acknowledged; work so far: %v", len(onDisk), len(acked), s.snapshotCounts())
		lifetimes = append(lifetimes, lastWindow(samples, window))
		samples, born = nil, time.Now()
	}
	stopWorkers()
	lifetimes = append(lifetimes, lastWindow(samples, window))
	if *soakRetentionFlag > 0 {
		if v := acrossLifetimes(lifetimes); len(v) > 0 {
			t.Fatalf("RSS grows across daemon lifetimes with retention on:\n%s", strings.Join(v, "\n"))
		}
		inv["lifetimes flat across restarts"] = len(lifetimes)
	}
	d = s.cur.Load()
	d.stop()
	if st := doctor(t, home); st["store"] != "ok" || st["orphans"] != "ok" {
		t.Fatalf("shardctl doctor after the soak: store %s, orphans %s", st["store"], st["orphans"])
	}
	inv["doctor after the soak"]++
	t.Logf("work done: %v", s.snapshotCounts())
	t.Logf("invariants held: %v", inv)
}

// removable reports whether retention may have removed a job acknowledged
// at ackedAt by now: only a job finished for longer than -soak-retention
// goes, and it cannot have finished before it was acknowledged.
func removable(ackedAt, now time.Time) bool {
	return *soakRetentionFlag > 0 && !ackedAt.IsZero() && ackedAt.Before(now.Add(-*soakRetentionFlag))
}

// lastWindow is the samples of the last window of a lifetime.
func lastWindow(samples []sample, window time.Duration) []sample {
	if len(samples) == 0 {
		return nil
	}
	end := samples[len(samples)-1].at
	i := len(samples)
	for i > 0 && !samples[i-1].at.Before(end.Add(-window)) {
		i--
	}
	return samples[i:]
}

// acrossLifetimes applies the growth rules to whole daemon lifetimes: the
// median of the last lifetime's last window against the first's. Each
// restart reloads the history the daemon keeps; with retention on that
// history stops growing, so a later lifetime may not settle higher than
// the first by more than the rule allows. Fewer than two lifetimes judge
// nothing.
func acrossLifetimes(lifetimes [][]sample) []string {
	if len(lifetimes) < 2 || len(lifetimes[0]) == 0 || len(lifetimes[len(lifetimes)-1]) == 0 {
		return nil
	}
	first, last := lifetimes[0], lifetimes[len(lifetimes)-1]
	var out []string
	for _, r := range growthRules {
		a, b := median(first, r.get), median(last, r.get)
		if b > r.factor*a+r.slack {
			out = append(out, fmt.Sprintf("%s: the first lifetime settled at a median of %.0f, the last (of %d) at %.0f (limit %.1f× + %.0f)",
				r.name, a, len(lifetimes), b, r.factor, r.slack))
		}
	}
	return out
}

// soakWorker is one part of the soak's workload, named for -soak-workers.
type soakWorker struct {
	name string
	run  func(context.Context, *rand.Rand)
}

// soakOpts are the soak daemon's options: soakFlags, and the heap profile
// of -soak-heap, which only the last daemon writes (the SIGTERM at the end;
// the others are SIGKILLed).
func soakOpts() daemonOpts {
	o := daemonOpts{flags: append(slices.Clone(soakFlags), "--jobs.retention", soakRetentionFlag.String())}
	if *soakHeapFlag != "" {
		o.env = []string{"SHARD_HEAPPROFILE=" + *soakHeapFlag}
	}
	return o
}

// soakCSV opens -soak-csv (when set) and returns what appends one sample
// to it; without the flag it returns a no-op.
func soakCSV(t *testing.T) func(s sample, pid int, began time.Time) {
	if *soakCSVFlag == "" {
		return func(sample, int, time.Time) {}
	}
	f, err := os.Create(*soakCSVFlag)
	if err != nil {
		t.Fatalf("soak-csv: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	fmt.Fprintln(f, "elapsed_s,pid,rss_bytes,goroutines,fds,rss_anon_bytes,rss_file_bytes,heap_inuse_bytes")
	return func(s sample, pid int, began time.Time) {
		fmt.Fprintf(f, "%.0f,%d,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f\n", s.at.Sub(began).Seconds(), pid, s.rss, s.goroutines, s.fds, s.anon, s.file, s.heap)
	}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *soak) snapshotCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneMap(s.counts)
}

// pause waits d or until ctx ends; it reports whether to go on.
func pause(ctx context.Context, d time.Duration) bool {
	sleepCtx(ctx, d)
	return ctx.Err() == nil
}

// jobs creates subagent jobs until each parent has 8 children, then
// relaunches idle children (so that agents do not pile up), and now and
// then stops a job.
func (s *soak) jobs(ctx context.Context, rng *rand.Rand) {
	tasks := []string{"sim: say done", "sim: sleep 500\nsim: say done", "sim: sleep 3000\nsim: say done",
		`sim: tool bash {"command":"sleep 5; true"}`}
	for pause(ctx, time.Duration(200+rng.IntN(800))*time.Millisecond) {
		c := s.dial(allowAll) // an interactive user of the parents: allows the children's tools
		if c == nil {
			continue
		}
		parent := s.parents[rng.IntN(len(s.parents))]
		if err := tryCall(c, &protocol.AgentAttach{Header: hdr(protocol.TypeAgentAttach, parent)}, nil); err != nil {
			s.check("attach parent", err)
			c.Close()
			continue
		}
		s.mu.Lock()
		kids := slices.Clone(s.children[parent])
		s.mu.Unlock()
		for n := 0; n < 5 && ctx.Err() == nil; n++ {
			task := tasks[rng.IntN(len(tasks))]
			switch {
			case len(kids) < 8:
				req := randomCreate(rng, parent)
				var data protocol.SubagentCreateData
				err := tryCall(c, req, &data)
				s.check("subagent.create", err)
				if err == nil {
					s.mu.Lock()
					s.acked[data.JobID], s.ackedAt[data.JobID] = data, time.Now()
					for _, r := range data.Runs {
						s.children[parent] = append(s.children[parent], r.AgentID)
					}
					kids = slices.Clone(s.children[parent])
					s.mu.Unlock()
					s.count("create")
				}
			case rng.IntN(10) == 0:
				var st protocol.SubagentStatusData
				err := tryCall(c, &protocol.SubagentStatus{Header: hdr(protocol.TypeSubagentStatus, ""), ParentAgentID: parent}, &st)
				s.check("subagent.status", err)
				if err == nil && len(st.Jobs) > 0 {
					j := st.Jobs[rng.IntN(len(st.Jobs))]
					s.check("subagent.stop", tryCall(c, &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop, ""), ParentAgentID: parent, Handle: j.JobID}, nil))
					s.count("stop")
				}
			default:
				kid := kids[rng.IntN(len(kids))]
				var data protocol.SubagentRelaunchData
				err := tryCall(c, &protocol.SubagentRelaunch{Header: hdr(protocol.TypeSubagentRelaunch, ""), ParentAgentID: parent, Target: kid, Task: task}, &data)
				if pe := protoErr(err); pe != nil && pe.Code == protocol.CodeNotFound && *soakRetentionFlag > 0 {
					// Retention removed the child with its last job: it
					// is no longer one of the parent's.
					s.mu.Lock()
					s.children[parent] = slices.DeleteFunc(s.children[parent], func(id string) bool { return id == kid })
					kids = slices.Clone(s.children[parent])
					s.mu.Unlock()
					s.count("child removed by retention")
					continue
				}
				s.check("subagent.relaunch", err, protocol.CodeConflict) // busy child
				if err == nil {
					s.mu.Lock()
					s.acked[data.JobID] = protocol.SubagentCreateData{JobID: data.JobID, Strategy: protocol.StrategySingle,
						Runs: []protocol.CreatedRun{{RunID: data.RunID, AgentID: data.AgentID}}}
					s.ackedAt[data.JobID] = time.Now()
					s.mu.Unlock()
					s.count("relaunch")
				}
			}
			sleepCtx(ctx, time.Duration(100+rng.IntN(300))*time.Millisecond)
		}
		c.Close()
	}
}

// prompts drives the direct agents and the parents with short turns and
// small floods.
func (s *soak) prompts(ctx context.Context, rng *rand.Rand) {
	msgs := []string{"sim: say hi", "sim: sleep 300\nsim: say later", "sim: flood 200 512", "sim: think hmm\nsim: say ok"}
	for pause(ctx, time.Duration(200+rng.IntN(500))*time.Millisecond) {
		c := s.dial(allowAll)
		if c == nil {
			continue
		}
		targets := append(slices.Clone(s.direct), s.parents...)
		for n := 0; n < 10 && ctx.Err() == nil; n++ {
			id := targets[rng.IntN(len(targets))]
			err := tryCall(c, &protocol.AgentAttach{Header: hdr(protocol.TypeAgentAttach, id)}, nil)
			s.check("attach", err)
			if err == nil {
				err = tryCall(c, &protocol.Prompt{Header: hdr(protocol.TypePrompt, id), Message: msgs[rng.IntN(len(msgs))], StreamingBehavior: protocol.BehaviorFollowUp}, nil)
				s.check("prompt", err, protocol.CodeConflict)
				s.count("prompt")
			}
			sleepCtx(ctx, time.Duration(100+rng.IntN(400))*time.Millisecond)
		}
		c.Close()
	}
}

// runtimeKills SIGKILLs a random runtime of the current daemon now and then.
func (s *soak) runtimeKills(ctx context.Context, rng *rand.Rand) {
	for pause(ctx, time.Duration(10+rng.IntN(30))*time.Second) {
		d := s.cur.Load()
		var rts []procInfo
		for _, p := range procsWithEnv(d.homeEnv()) {
			if st, err := procstat.Read(p.pid); err == nil && st.PPID == d.pid() {
				rts = append(rts, p)
			}
		}
		if len(rts) > 0 {
			_ = syscall.Kill(rts[rng.IntN(len(rts))].pid, syscall.SIGKILL)
			s.count("runtime kill")
		}
	}
}

// slowConsumers floods a fresh agent with a client attached that never
// reads, and checks that it is dropped.
func (s *soak) slowConsumers(ctx context.Context, rng *rand.Rand) {
	for pause(ctx, time.Duration(60+rng.IntN(60))*time.Second) {
		d := s.cur.Load()
		c := s.dial(nil)
		if c == nil {
			continue
		}
		var cr protocol.AgentCreateData
		// A fresh agent each time: a conversation holding a flood would not
		// take another. Its cwd is the soak's home (no t.TempDir here).
		err := tryCall(c, &protocol.AgentCreate{Header: hdr(protocol.TypeAgentCreate, ""), Cwd: s.home}, &cr)
		s.check("agent.create", err)
		if err != nil {
			c.Close()
			continue
		}
		slow, err := net.Dial("unix", s.socket)
		if err != nil {
			c.Close()
			continue
		}
		_, _ = fmt.Fprintf(slow, `{"id":"att","type":"agent.attach","agent_id":%q}`+"\n", cr.AgentID)
		m, _ := d.metrics()
		dropped := m[`shard_slow_consumers_dropped_total{transport="unix"}`]
		err = tryCall(c, &protocol.AgentAttach{Header: hdr(protocol.TypeAgentAttach, cr.AgentID)}, nil)
		if err == nil {
			err = tryCall(c, &protocol.Prompt{Header: hdr(protocol.TypePrompt, cr.AgentID), Message: "sim: flood 16000 1024"}, nil)
		}
		s.check("flood", err)
		for wait := time.Now().Add(2 * callTimeout); err == nil && s.cur.Load() == d; {
			if m, merr := d.metrics(); merr == nil && m[`shard_slow_consumers_dropped_total{transport="unix"}`] > dropped {
				break
			}
			if time.Now().After(wait) {
				s.fail("a client that does not read was not dropped during a 16 MB flood")
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Dropped: what it can still read ends.
		if b, rerr := readAll(slow, callTimeout); rerr != nil && !isEOF(rerr) && !errors.Is(rerr, syscall.ECONNRESET) && s.cur.Load() == d {
			s.fail("dropped slow consumer's connection did not end: %v (%d bytes read)", rerr, len(b))
		}
		slow.Close()
		// The flood agent's runtime is not needed any more.
		s.check("agent.kill", tryCall(c, &protocol.AgentKill{Header: hdr(protocol.TypeAgentKill, cr.AgentID), Force: true}, nil))
		c.Close()
		s.count("slow consumer")
	}
}

// storms connects, attaches and drops 50 clients at once.
func (s *soak) storms(ctx context.Context, rng *rand.Rand) {
	for pause(ctx, time.Duration(30+rng.IntN(60))*time.Second) {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				c := s.dial(nil)
				if c == nil {
					return
				}
				defer c.Close()
				id := s.direct[0]
				s.check("storm attach", tryCall(c, &protocol.AgentAttach{Header: hdr(protocol.TypeAgentAttach, id)}, nil))
			})
		}
		wg.Wait()
		s.count("storm")
	}
}

// malformed sends broken records; the connection must keep working.
func (s *soak) malformed(ctx context.Context, rng *rand.Rand) {
	for pause(ctx, time.Duration(20+rng.IntN(40))*time.Second) {
		c := s.dial(nil)
		if c == nil {
			continue
		}
		for _, f := range badFrames(s.direct[0]) {
			_ = c.Send(f.rec)
		}
		s.check("agent.list after bad frames", tryCall(c, &protocol.AgentList{Header: hdr(protocol.TypeAgentList, "")}, nil))
		c.Close()
		s.count("malformed")
	}
}
