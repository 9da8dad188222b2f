//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// jobsResults is the JSON result of the jobs scenario.
type jobsResults struct {
	Create    []jobsPhase      `json:"create,omitempty"`
	Wait      *waitPhase       `json:"wait,omitempty"`
	Stop      *stopPhase       `json:"stop,omitempty"`
	Reconcile []reconcilePhase `json:"reconcile,omitempty"`
}

type jobsPhase struct {
	Parents     int     `json:"parents"`
	Creates     int     `json:"creates"`
	Seconds     float64 `json:"seconds"`
	CreatesPerS float64 `json:"creates_per_s"`
	Ack         dist    `json:"ack_latency"`
	// Commits and CommitMeanMs are the daemon's bbolt write transactions
	// during the phase (its shard_bbolt_commit_seconds histogram): every
	// write, the runs' transitions included.
	Commits      int     `json:"commits"`
	CommitMeanMs float64 `json:"commit_mean_ms"`
	// CPU is the cores the daemon, its runtimes and the driver used.
	CPU cpuUse `json:"cpu"`
}

// runJobs runs the phases of the jobs scenario (--phases, default all):
//
//	create     --creates subagent.create calls spread over P concurrent
//	           parents (--parents, default 1,16), each a created agent with
//	           its own unix-socket connection issuing its creates back to
//	           back, on a fresh daemon per P. Each create is one task ("sim:
//	           say ok"); its runs execute meanwhile under the daemon's
//	           default jobs.max_active limits, as they would in real use.
//	wait       wait wake-up latency (jobs_wait.go).
//	stop       subagent.stop of executing runs (jobs_stop.go).
//	reconcile  startup reconciliation of stores of --runs run records
//	           (jobs_reconcile.go).
func runJobs(o *options) (*report, error) {
	phases := map[string]bool{}
	for _, p := range strings.Split(o.phases, ",") {
		switch p = strings.TrimSpace(p); p {
		case "":
		case "create", "wait", "stop", "reconcile":
			phases[p] = true
		default:
			return nil, fmt.Errorf("unknown jobs phase %q (want create, wait, stop, reconcile)", p)
		}
	}
	all := len(phases) == 0
	res := &jobsResults{}
	rep := &report{Header: []string{"phase", "n", "per s", "p50 ms", "p99 ms", "max ms", "seconds", "commits", "commit mean ms", "daemon cores", "runtimes cores"}, Results: res}
	sync := "on"
	if o.noSync {
		sync = "off (--no-sync)"
	}
	if all || phases["create"] {
		k := pick(o.creates, 200, 100, o.quick)
		ps, err := ints(o.parents, []int{1, 16})
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			mark := cleanupMark()
			ph, err := jobsPhaseRun(o, p, k)
			if err != nil {
				return nil, fmt.Errorf("%d parents: %w", p, err)
			}
			res.Create = append(res.Create, ph)
			runCleanupsFrom(mark) // this phase's daemon and everything it started
			rep.Rows = append(rep.Rows, []string{fmt.Sprintf("create, %d parents", ph.Parents), fmt.Sprint(ph.Creates), f0(ph.CreatesPerS),
				f2(ph.Ack.P50), f2(ph.Ack.P99), f2(ph.Ack.Max), f3(ph.Seconds), fmt.Sprint(ph.Commits), f2(ph.CommitMeanMs), f2(ph.CPU.Daemon), f2(ph.CPU.Children)})
		}
		rep.Notes = append(rep.Notes, "create: n creates, per s = creates/s; latency = subagent.create sent → its response received (the ack), fsync "+sync+
			"; one fresh daemon per parent count; the runs execute meanwhile ("+maxActiveNote(o)+"); commits = the daemon's bbolt write transactions in the phase (runs' transitions included), commit mean = their mean duration (fsync included); cores = CPU used by the daemon and by its runtime children over the phase, in cores (the machine has 2)")
	}
	if all || phases["wait"] {
		mark := cleanupMark()
		w, err := waitPhaseRun(o)
		if err != nil {
			return nil, fmt.Errorf("wait: %w", err)
		}
		runCleanupsFrom(mark)
		res.Wait = &w
		rep.Rows = append(rep.Rows, []string{fmt.Sprintf("wait wake-up, %d streams", w.Streams), fmt.Sprint(w.Latency.N), "",
			f2(w.Latency.P50), f2(w.Latency.P99), f2(w.Latency.Max), f3(w.Seconds), fmt.Sprint(w.Commits), f2(w.CommitMeanMs), f2(w.CPU.Daemon), f2(w.CPU.Children)})
		rep.Notes = append(rep.Notes, fmt.Sprintf("wait: each sample is a one-task job (\"sim: sleep %d\") with an observer connection attached to its child agent and a subagent.wait on the run pending on the parent's connection; latency = the observer receives the child's turn_end for the run → the wait response arrives (both timestamped by the driver); %d streams (parent + observer connection each) run samples concurrently on one daemon; samples whose wait was sent after the turn_end (%d) are dropped; fsync %s",
			w.SleepMs, w.Streams, w.Late, sync))
	}
	if all || phases["stop"] {
		mark := cleanupMark()
		sp, err := stopPhaseRun(o)
		if err != nil {
			return nil, fmt.Errorf("stop: %w", err)
		}
		runCleanupsFrom(mark)
		res.Stop = &sp
		rep.Rows = append(rep.Rows,
			[]string{fmt.Sprintf("stop ack, %d streams", sp.Streams), fmt.Sprint(sp.Ack.N), "",
				f2(sp.Ack.P50), f2(sp.Ack.P99), f2(sp.Ack.Max), f3(sp.Seconds), fmt.Sprint(sp.Commits), f2(sp.CommitMeanMs), f2(sp.CPU.Daemon), f2(sp.CPU.Children)},
			[]string{"stop → cancelled", fmt.Sprint(sp.Cancelled.N), "", f2(sp.Cancelled.P50), f2(sp.Cancelled.P99), f2(sp.Cancelled.Max), "", "", "", "", ""})
		rep.Notes = append(rep.Notes, fmt.Sprintf("stop: each sample is a one-task job whose child sleeps (\"sim: sleep 60000\"), stopped once the parent's connection saw its run active; ack = subagent.stop sent → its response; cancelled = subagent.stop sent → the parent's connection receives the run's subagent_run_changed to cancelled (the abort stage ends the turn at once); %d streams (a parent and its connection each) on one daemon; fsync %s", sp.Streams, sync))
	}
	if all || phases["reconcile"] {
		sizes, err := ints(o.runs, nil)
		if err != nil {
			return nil, err
		}
		if sizes == nil {
			sizes = []int{10000, 100000}
			if o.quick {
				sizes = []int{1000, 10000}
			}
		}
		for _, mix := range []string{"mixed", "history"} {
			for _, n := range sizes {
				r, err := reconcilePhaseRun(o, mix, n)
				if err != nil {
					return nil, fmt.Errorf("reconcile %s %d: %w", mix, n, err)
				}
				res.Reconcile = append(res.Reconcile, r)
				rep.Rows = append(rep.Rows, []string{fmt.Sprintf("reconcile %d runs (%s)", r.Runs, mix), fmt.Sprint(r.Ended), f0(float64(r.Runs) / r.Seconds),
					"", "", "", f3(r.Seconds), "", "", "", ""})
			}
		}
		rep.Notes = append(rep.Notes, "reconcile: in-process jobs.Reconcile (the function daemon.Start calls before serving) on a store reopened with fsync "+
			sync+"; n = runs it ended (starting/active → interrupted or cancelled, queued chain steps behind them → cancelled), per s = run records/s; "+
			"the store holds jobs of 4 runs: mixed = 1/4 parallel with live runs, 1/4 chains with a live step, 1/2 terminal; "+
			"history = 1 job in 100 of each live kind, the rest terminal (Reconcile reads the open-jobs index, so history costs what its open jobs cost); open and the coordinator's full load (Store.Jobs) are in the JSON, not in the time")
	}
	return rep, nil
}

// jobsDaemonArgs are the daemon flags of the jobs scenario.
func jobsDaemonArgs(o *options) []string {
	if o.maxActive > 0 {
		return []string{"--jobs.max-active", strconv.Itoa(o.maxActive)}
	}
	return nil
}

func jobsPhaseRun(o *options, parents, creates int) (jobsPhase, error) {
	d, err := startDaemon(o, nil, jobsDaemonArgs(o)...)
	if err != nil {
		return jobsPhase{}, err
	}
	ctl, err := d.dial()
	if err != nil {
		return jobsPhase{}, err
	}
	drain(ctl)
	ids := make([]string, parents)
	conns := make([]*leanCaller, parents)
	for i := range ids {
		if ids[i], err = createAgent(ctl); err != nil {
			return jobsPhase{}, err
		}
		if conns[i], err = d.dialLean(); err != nil {
			return jobsPhase{}, err
		}
	}
	before := d.commitStats()
	lat := make([][]time.Duration, parents)
	errs := make([]error, parents)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range parents {
		n := creates / parents
		if i < creates%parents {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range n {
				cmd := &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate},
					ParentAgentID: ids[i], Name: fmt.Sprintf("b%d", j), Task: "sim: say ok"}
				t0 := time.Now()
				if err := conns[i].call(cmd); err != nil {
					errs[i] = fmt.Errorf("subagent.create %d of parent %d: %w", j, i, err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	after := d.commitStats()
	var all []time.Duration
	for i := range parents {
		if errs[i] != nil {
			return jobsPhase{}, errs[i]
		}
		all = append(all, lat[i]...)
	}
	ph := jobsPhase{Parents: parents, Creates: len(all), Seconds: wall.Seconds(),
		CreatesPerS: float64(len(all)) / wall.Seconds(), Ack: summarize(all)}
	ph.Commits, ph.CommitMeanMs, ph.CPU = after.since(before)
	return ph, nil
}

// commitStats is the daemon's bbolt commit histogram (count and sum) and
// the CPU used so far by the daemon and its runtimes.
type commitStats struct {
	count int
	sum   float64 // seconds
	cpu   cpuSnap
	at    time.Time
}

func (d *daemon) commitStats() commitStats {
	st := commitStats{cpu: d.cpu(), at: time.Now()}
	if m, err := d.metrics(); err == nil {
		st.count, st.sum = int(m["shard_bbolt_commit_seconds_count"]), m["shard_bbolt_commit_seconds_sum"]
	}
	return st
}

// since fills in the commits and CPU of ph between b and a.
func (a commitStats) since(b commitStats) (commits int, meanMs float64, cpu cpuUse) {
	cpu = cpuBetween(b.cpu, a.cpu, a.at.Sub(b.at))
	if commits = a.count - b.count; commits > 0 {
		meanMs = (a.sum - b.sum) / float64(commits) * 1000
	}
	return commits, meanMs, cpu
}

func maxActiveNote(o *options) string {
	if o.maxActive > 0 {
		return fmt.Sprintf("jobs.max_active %d, --max-active", o.maxActive)
	}
	return "jobs.max_active default 16"
}

// drain discards c's events so its reader never blocks.
func drain(c *client.Conn) {
	go func() {
		for range c.Events() {
		}
	}()
}

// leanCaller is a parent's connection in the create phase: raw JSONL over
// the unix socket, one command in flight, and only its response decoded.
// Every connection receives every daemon broadcast (agent_spawned,
// agent_status_changed, agent_activity: ~30 per create at 16 parents); the
// client library would decode each of them fully, on the 2 cores the
// daemon and its runtimes share with the driver. Here a record that is not
// a response is skipped after one byte scan. The probe of fanout reads raw
// for the same reason.
type leanCaller struct {
	nc  net.Conn
	rd  *protocol.Reader
	seq int
}

func (d *daemon) dialLean() (*leanCaller, error) {
	nc, err := net.DialTimeout("unix", d.socket(), 5*time.Second)
	if err != nil {
		return nil, err
	}
	atCleanup(func() { nc.Close() })
	return &leanCaller{nc: nc, rd: protocol.NewReader(nc, 0)}, nil
}

// responseType marks a response record without decoding it.
var responseType = []byte(`"type":"response"`)

// call sends cmd and returns once its response arrived (an error for a
// failed one), skipping everything before it; bounded by reqTimeout.
func (l *leanCaller) call(cmd protocol.Typed) error {
	l.seq++
	id := "lean-" + strconv.Itoa(l.seq)
	cmd.Head().ID = id
	rec, err := protocol.Marshal(cmd)
	if err != nil {
		return err
	}
	_ = l.nc.SetDeadline(time.Now().Add(reqTimeout))
	if _, err := l.nc.Write(append(rec, '\n')); err != nil {
		return err
	}
	for {
		rec, err := l.rd.Next()
		if err != nil {
			return err
		}
		if !bytes.Contains(rec, responseType) {
			continue
		}
		var resp protocol.Response
		if err := json.Unmarshal(rec, &resp); err != nil {
			return fmt.Errorf("response: %w", err)
		}
		if resp.Type != protocol.TypeResponse || resp.ID != id {
			continue
		}
		if !resp.Success {
			return fmt.Errorf("%s failed: %s", resp.Command, rec)
		}
		return nil
	}
}
