//go:build linux

// Command bench is Shard's benchmark driver (BENCHMARKS.md has the
// targets and the latest results).
//
//	go run ./bench <scenario> [flags]
//
// It starts a real shardd on a temporary home (fsync on unless --no-sync),
// drives it through its real transports (unix socket, WebSocket) with the
// sim provider, prints a table and writes a JSON result file (--out,
// default bench-<scenario>.json). It measures and reports; it never asserts
// a timing.
//
// Scenarios:
//
//	relay   one agent floods --n deltas of --bytes bytes to one attached
//	        client; baseline in the same run: the same runtime binary
//	        (shardd agent --headless) driven directly over its stdio pipes,
//	        no daemon. Reports events/s, MB/s and the ratio daemon/baseline.
//	fanout  one agent floods --n stamped deltas paced at --rate events/s
//	        (`sim: flood <n> <bytes> stamp rate <r>`) to C attached clients
//	        (--clients, default 1,10,100) over each of --transports (unix,
//	        ws). Per event: added latency = client receive time − the
//	        runtime's send stamp (p50/p99/p999), and the fan-out skew (each
//	        client's receive time − the earliest of that delta). Baseline
//	        in the same run: the same runtime's stamped flood read straight
//	        from its stdout; and the floor: a bare relay process (this
//	        binary, floor.go) copying that stdout to each unix client count,
//	        read by the same probes. Headline: 10 clients at 5,000 events/s.
//	jobs    subagent.create acknowledgement latency p50/p99 and creates/s
//	        for --creates creates issued from 1 and 16 (--parents)
//	        concurrent parent agents; subagent.wait wake-up latency (run's
//	        turn ended → pending wait answered, --wait-samples); startup
//	        reconciliation time of stores of 10k and 100k run records
//	        (--runs). --phases picks some of create, wait, reconcile.
//	resync  agent.attach → sync latency for live windows of 10 and 1,000
//	        messages (--windows), built by prompting an agent repeatedly.
//	scale   for each A of --agents (default 100,500,1000; quick 20,50) a
//	        fresh daemon with a short runtime.idle_timeout: create A sim
//	        agents (spawn rate, time to all ready), attach, one prompt each,
//	        then idle: daemon RSS, heap and goroutines, absolute and per
//	        agent over the pre-spawn value; again once every runtime has
//	        been reaped. Stops early when memory would run low.
//	workspace  workspace.create and workspace.retire p50/p99 for a real git
//	        repository of --files files (default 10,000; quick 50),
//	        --samples pairs (default 50; quick 5).
//
//	history  start-up, memory and list latency against history: for the
//	        empty store and each of --history finished-job counts (default
//	        1000,10000,100000; quick 1000; 1000000 opt-in) a fresh home
//	        filled through the store package (no daemon: one finished run
//	        per job, a child agent per 10 jobs, 100 stopped parents), then
//	        shardd on it: start to ready (daemon.status answered), RSS and
//	        heap after --live agents (default 100) were created, and p50/p99
//	        of agent.list, jobs.list (one parent; limit 20) and jobs.show
//	        (id; alias) over --samples sequential requests.
//	cluster  a single shardd against clusters of shardd nodes on this
//	        machine (embedded NATS JetStream, loopback routes): agent.create
//	        ack and creates/s spread over the nodes' sockets and a stopped
//	        runtime's wake-up by a prompt, for --nodes (default 1,3); live
//	        agents held and memory per live agent for --live-nodes (default
//	        1,2,3) at --live-per-node agents each (default 300), plotted
//	        (cluster-live.svg); attach and streaming to an agent of n3
//	        through n3 against through n1 (--samples, --n, --rate); the
//	        first prompt to a passivated agent of n3 through n3 and through
//	        n1 (--wait-samples, half per path); the runs bucket's scans
//	        (InterruptNodeRuns, Requeue, HeldBy) at --runs records (default
//	        1000,4000,16000).
//	        --phases picks some of create, wake, live, attach, passive, scan.
//
// --quick shrinks every scenario to a smoke run of well under 20 s
// (scale: under a minute).
//
// --plots DIR (default .) receives the PNG plots a scenario draws (fanout:
// latency CDF and tail; scale: RSS vs agents; history: RSS and start time
// vs history size). --cpuprofile FILE makes each
// daemon write a CPU profile (SHARD_CPUPROFILE; a tag such as c10-unix is
// inserted before the extension when a scenario runs several daemons);
// the driver stops the daemon gracefully after the measured phase so the
// profile is flushed, then writes the top 15 of `go tool pprof -top` for
// each to <out>-pprof.txt and prints the first.
//
// shardd is taken from --shardd, or built once with `go build` into a
// temporary directory. Every process the driver starts (the daemon, its
// runtime children, baseline runtimes) is killed on exit, on error and on
// Ctrl-C: whatever still carries the run's SHARD_HOME gets SIGKILL.
package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/shard-dev/shard/internal/shardtest"
)

// options are the driver's flags; each scenario reads the ones it needs.
type options struct {
	shardd string
	out    string
	// compare is an earlier result file to print the change against.
	compare string
	quick   bool
	noSync  bool
	// daemonArgs are extra shardd flags for every daemon of the run
	// (--daemon-args, split on spaces), for side-by-side runs of a setting.
	daemonArgs string
	n          int
	bytes      int
	clients    string
	ws         bool
	creates    int
	parents    string
	windows    string
	samples    int
	files      int
	// jobs: which phases, wait samples, reconcile sizes, daemon's cap
	phases      string
	waitSamples int
	stopSamples int
	runs        string
	maxActive   int
	// history: finished-job counts and live agents
	history string
	// runsPerAgent: history's jobs per child agent (0: 10).
	runsPerAgent int
	live         int
	// cluster: node counts of the create and wake phases and of the live
	// phase, and the live phase's agents per node.
	nodes, liveNodes string
	livePerNode      int
	// readyTimeout, when set, bounds a daemon's start instead of
	// readyTimeout (history: a large store loads for long today).
	readyTimeout time.Duration

	rate       int
	transports string
	receiver   string
	agents     string
	idle       time.Duration
	plots      string
	cpuprofile string

	// Set while running: the tag of the next daemon's CPU profile and the
	// profiles written.
	profileTag string
	profiles   []profileRun
}

type scenario struct {
	name string
	run  func(o *options) (*report, error)
}

var scenarios = []scenario{
	{"relay", runRelay},
	{"fanout", runFanout},
	{"jobs", runJobs},
	{"resync", runResync},
	{"scale", runScale},
	{"workspace", runWorkspace},
	{"history", runHistory},
	{"cluster", runCluster},
}

// report is a scenario's outcome: the printed table and the JSON results.
type report struct {
	Header  []string `json:"-"`
	Rows    [][]string
	Results any
	Notes   []string
	// plot, when set, draws the scenario's PNG plots into dir and returns
	// their paths.
	plot func(dir string) ([]string, error)
}

// result is the JSON result file.
type result struct {
	Scenario  string    `json:"scenario"`
	Started   time.Time `json:"started"`
	Duration  string    `json:"duration"`
	Args      []string  `json:"args"`
	Quick     bool      `json:"quick"`
	Fsync     bool      `json:"fsync"`
	GoVersion string    `json:"go_version"`
	NumCPU    int       `json:"num_cpu"`
	// The machine's 1-minute load average at the start and the end: these
	// machines are shared, and a high load explains noisy figures.
	LoadStart float64      `json:"loadavg_1m_start"`
	LoadEnd   float64      `json:"loadavg_1m_end"`
	Results   any          `json:"results"`
	Notes     []string     `json:"notes,omitempty"`
	Plots     []string     `json:"plots,omitempty"`
	Profiles  []profileRun `json:"cpu_profiles,omitempty"`
}

func usage(fs *flag.FlagSet) {
	fmt.Fprintf(os.Stderr, "usage: go run ./bench <scenario> [flags]\n       go run ./bench compare BASE.json NEW.json\n       go run ./bench soakplot SOAK.csv OUT.png\nscenarios:")
	for _, s := range scenarios {
		fmt.Fprintf(os.Stderr, " %s", s.name)
	}
	fmt.Fprintf(os.Stderr, "\nflags:\n")
	fs.PrintDefaults()
}

// interrupted is set once a signal handler has taken over the exit.
var interrupted atomic.Bool

func main() {
	if os.Getenv(floorEnv) != "" {
		os.Exit(runFloorRelay()) // the fan-out's bare relay (floor.go)
	}
	code := realMain(os.Args[1:])
	if interrupted.Load() {
		select {} // the signal handler cleans up and exits
	}
	os.Exit(code)
}

func realMain(args []string) int {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.shardd, "shardd", "", "shardd binary to run (default: go build it into a temp dir)")
	fs.StringVar(&o.out, "out", "", "JSON result file (default bench-<scenario>.json)")
	fs.BoolVar(&o.quick, "quick", false, "smoke-run sizes (each scenario well under 20 s)")
	fs.BoolVar(&o.noSync, "no-sync", false, "run shardd with --store.no-sync (fsync off)")
	fs.StringVar(&o.daemonArgs, "daemon-args", "", `extra shardd flags for every daemon, split on spaces (e.g. "--jobs.nice 0")`)
	fs.IntVar(&o.n, "n", 0, "relay/fanout: deltas per flood (default 100000 relay, 10000 fanout; quick 20000/2000)")
	fs.IntVar(&o.bytes, "bytes", 0, "relay/fanout: bytes per delta (default 256 relay, 64 fanout)")
	fs.StringVar(&o.clients, "clients", "", "fanout: comma-separated client counts (default 1,10,100)")
	fs.BoolVar(&o.ws, "ws", false, "fanout: WebSocket only (same as --transports ws)")
	fs.StringVar(&o.transports, "transports", "", "fanout: comma-separated client transports, unix and/or ws (default unix,ws)")
	fs.StringVar(&o.receiver, "receiver", "probe", "fanout: measuring clients: probe (raw records, only the stamp parsed) or client (the client library, every record decoded)")
	fs.IntVar(&o.rate, "rate", 0, "fanout: deltas per second the runtime paces its flood at; -1: unpaced (default 5000)")
	fs.StringVar(&o.agents, "agents", "", "scale: comma-separated agent counts (default 100,500,1000; quick 20,50)")
	fs.DurationVar(&o.idle, "idle-timeout", 0, "scale: the daemon's runtime.idle_timeout (default 5s + 60ms per agent)")
	fs.StringVar(&o.plots, "plots", ".", "directory for the PNG plots")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write the daemon's CPU profile(s) to this file (SHARD_CPUPROFILE)")
	fs.IntVar(&o.creates, "creates", 0, "jobs: subagent.create calls per parent count (default 200; quick 100); cluster: agent.create calls per node count (default 300; quick 30)")
	fs.StringVar(&o.parents, "parents", "", "jobs: comma-separated concurrent parent counts (default 1,16)")
	fs.StringVar(&o.phases, "phases", "", "jobs: comma-separated phases to run: create, wait, reconcile (default all); cluster: create, wake, live, attach, scan, passive")
	fs.IntVar(&o.waitSamples, "wait-samples", 0, "jobs: subagent.wait wake-up samples (default 100; quick 24); cluster: stopped-runtime wake-up samples, and passivated wake-ups over both paths (default 60; quick 6)")
	fs.IntVar(&o.stopSamples, "stop-samples", 0, "jobs: subagent.stop samples (default 100; quick 16)")
	fs.IntVar(&o.maxActive, "max-active", 0, "jobs: the daemon's --jobs.max-active, to hold runs back while creates are measured (default: the daemon's own, 16)")
	fs.StringVar(&o.runs, "runs", "", "jobs: comma-separated run-record counts to reconcile (default 10000,100000; quick 1000,10000); cluster: run-record counts of the scan phase (default 1000,4000,16000; quick 200,1000)")
	fs.StringVar(&o.windows, "windows", "", "resync: comma-separated live-window sizes in messages (default 10,1000; quick 10,100)")
	fs.IntVar(&o.samples, "samples", 0, "resync: attach samples per window (default 200; quick 100); workspace: create/retire pairs (default 50; quick 5); history: requests per list (default 300; quick 50)")
	fs.StringVar(&o.history, "history", "", "history: comma-separated finished-job counts, each on a fresh store beside an empty one (default 1000,10000,100000; quick 1000; the target's is 1000000)")
	fs.IntVar(&o.runsPerAgent, "runs-per-agent", 0, "history: jobs per child agent (default 10; 1 makes an agent per job)")
	fs.IntVar(&o.live, "live", 0, "history: live agents created through the daemon in every phase (default 100; quick 3)")
	fs.StringVar(&o.nodes, "nodes", "", "cluster: comma-separated node counts of the create and wake phases (default 1,3; 1 is a single shardd)")
	fs.StringVar(&o.liveNodes, "live-nodes", "", "cluster: comma-separated node counts of the live phase (default 1,2,3)")
	fs.IntVar(&o.livePerNode, "live-per-node", 0, "cluster: live agents per node in the live phase, its bound (default 300; quick 5)")
	fs.IntVar(&o.files, "files", 0, "workspace: files in the benchmark repository (default 10000; quick 50)")
	fs.StringVar(&o.compare, "compare", "", "an earlier result file of the same scenario: print each metric's change against it")
	fs.Usage = func() { usage(fs) }
	if len(args) > 0 && args[0] == "compare" {
		return compareFiles(args[1:])
	}
	if len(args) > 0 && args[0] == "soakplot" {
		return soakPlot(args[1:])
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		usage(fs)
		return 2
	}
	var sc *scenario
	for i := range scenarios {
		if scenarios[i].name == args[0] {
			sc = &scenarios[i]
		}
	}
	if sc == nil {
		fmt.Fprintf(os.Stderr, "bench: unknown scenario %q\n", args[0])
		usage(fs)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.out == "" {
		o.out = "bench-" + sc.name + ".json"
	}

	// Ctrl-C and SIGTERM: clean up everything we started, then exit.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		interrupted.Store(true)
		fmt.Fprintf(os.Stderr, "\nbench: %v: cleaning up\n", s)
		runCleanups()
		os.Exit(130)
	}()
	defer runCleanups()

	if o.shardd == "" {
		bin, err := buildShardd()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		o.shardd = bin
	}
	scenarioMark := cleanupMark() // what the scenario starts is cleaned after it

	start, load0 := time.Now(), loadAvg()
	rep, err := sc.run(o)
	if err != nil {
		if !interrupted.Load() {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", sc.name, err)
		}
		return 1
	}
	dur := time.Since(start)
	var plots []string
	if rep.plot != nil {
		if err := os.MkdirAll(o.plots, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		if plots, err = rep.plot(o.plots); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("plots failed: %v", err))
		}
	}
	// Every daemon still running is stopped gracefully here, so that its
	// CPU profile is flushed before it is read.
	runCleanupsFrom(scenarioMark)
	profTxt := profileReport(o, rep)
	printTable(rep)
	res := result{
		Scenario: sc.name, Started: start.UTC(), Duration: dur.Round(time.Millisecond).String(),
		Args: args, Quick: o.quick, Fsync: !o.noSync, GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
		LoadStart: load0, LoadEnd: loadAvg(),
		Results: rep.Results, Notes: rep.Notes, Plots: plots, Profiles: o.profiles,
	}
	if profTxt != "" {
		path := strings.TrimSuffix(o.out, filepath.Ext(o.out)) + "-pprof.txt"
		if err := os.WriteFile(path, []byte(profTxt), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		fmt.Printf("\nCPU profile tops written to %s\n", path)
	}
	for _, p := range plots {
		fmt.Println("plot:", p)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if err := os.WriteFile(o.out, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Printf("\nresults written to %s (%s, fsync %v, load average %.2f → %.2f on %d CPUs)\n", o.out, res.Duration, res.Fsync, res.LoadStart, res.LoadEnd, res.NumCPU)
	if o.compare != "" {
		base, err := os.ReadFile(o.compare)
		if err == nil {
			err = printComparison(os.Stdout, o.compare, base, append(b, '\n'))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench compare:", err)
			return 1
		}
	}
	return 0
}

func printTable(r *report) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, strings.Join(r.Header, "\t")+"\t")
	for _, row := range r.Rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Println("note:", n)
	}
}

// profileReport reads the top of every CPU profile written during the run,
// adds the first (the scenario's headline phase comes first) to the notes
// and returns the text of all for the -pprof.txt file.
func profileReport(o *options, rep *report) string {
	var b strings.Builder
	for i := range o.profiles {
		p := &o.profiles[i]
		top, err := pprofTop(o.shardd, p.Path, 15)
		if err != nil {
			top = err.Error()
		}
		p.Top = top
		fmt.Fprintf(&b, "==== %s (%s)\n%s\n", cmp.Or(p.Tag, "daemon"), p.Path, top)
	}
	if len(o.profiles) > 0 {
		p := o.profiles[0]
		rep.Notes = append(rep.Notes, fmt.Sprintf("CPU profile of the daemon (%s, %s), go tool pprof -top, top 15:\n%s",
			cmp.Or(p.Tag, "whole run"), p.Path, strings.TrimRight(p.Top, "\n")))
	}
	return b.String()
}

// ---- cleanup registry ----

var (
	cleanMu  sync.Mutex
	cleanups []func()
	// cleaning serializes runs of cleanups, so that an interrupt waits for
	// a cleanup already under way before exiting.
	cleaning sync.Mutex
)

// atCleanup registers f to run (last registered first) when the driver
// exits, fails or is interrupted.
func atCleanup(f func()) {
	cleanMu.Lock()
	defer cleanMu.Unlock()
	cleanups = append(cleanups, f)
}

// runCleanups runs and forgets every registered cleanup.
func runCleanups() { runCleanupsFrom(0) }

// cleanupMark returns a mark for runCleanupsFrom.
func cleanupMark() int {
	cleanMu.Lock()
	defer cleanMu.Unlock()
	return len(cleanups)
}

// runCleanupsFrom runs and forgets the cleanups registered since mark.
func runCleanupsFrom(mark int) {
	cleaning.Lock()
	defer cleaning.Unlock()
	cleanMu.Lock()
	if mark > len(cleanups) {
		mark = len(cleanups)
	}
	fs := cleanups[mark:]
	cleanups = cleanups[:mark:mark]
	cleanMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// buildShardd builds cmd/shardd into a temporary directory.
func buildShardd() (string, error) {
	dir, err := os.MkdirTemp("", "shard-bench-bin")
	if err != nil {
		return "", err
	}
	atCleanup(func() { os.RemoveAll(dir) })
	fmt.Fprintln(os.Stderr, "bench: building shardd …")
	bins, err := shardtest.Build(dir, nil, os.Stderr, "shardd")
	if err != nil {
		return "", err
	}
	bin := bins[0]
	return bin, nil
}

// ---- small helpers ----

// ints parses a comma-separated list of positive integers, or def if s is
// empty.
func ints(s string, def []int) ([]int, error) {
	if s == "" {
		return def, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad list %q: want positive integers", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func pick(v, def, quick int, q bool) int {
	switch {
	case v > 0:
		return v
	case q:
		return quick
	default:
		return def
	}
}
