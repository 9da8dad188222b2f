//go:build linux

// Command bench is Shard's benchmark driver (issue 7, first cut).
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
//	fanout  one flooding agent and C attached clients (--clients, default
//	        1,10,100; --ws for WebSocket). Deltas carry no timestamp, so the
//	        per-event figure is the "fan-out skew": for every delta, each
//	        client's receive time minus the earliest receive time of that
//	        same delta over all clients (p50/p99/p999), plus throughput.
//	jobs    subagent.create acknowledgement latency p50/p99 and creates/s
//	        for --creates creates issued from 1 and 16 (--parents)
//	        concurrent parent agents.
//	resync  agent.attach → sync latency for live windows of 10 and 1,000
//	        messages (--windows), built by prompting an agent repeatedly.
//
// --quick shrinks every scenario to a smoke run of well under 20 s.
//
// shardd is taken from --shardd, or built once with `go build` into a
// temporary directory. Every process the driver starts (the daemon, its
// runtime children, baseline runtimes) is killed on exit, on error and on
// Ctrl-C: whatever still carries the run's SHARD_HOME gets SIGKILL.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
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
)

// options are the driver's flags; each scenario reads the ones it needs.
type options struct {
	shardd  string
	out     string
	quick   bool
	noSync  bool
	n       int
	bytes   int
	clients string
	ws      bool
	creates int
	parents string
	windows string
	samples int
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
}

// report is a scenario's outcome: the printed table and the JSON results.
type report struct {
	Header  []string `json:"-"`
	Rows    [][]string
	Results any
	Notes   []string
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
	Results   any       `json:"results"`
	Notes     []string  `json:"notes,omitempty"`
}

func usage(fs *flag.FlagSet) {
	fmt.Fprintf(os.Stderr, "usage: go run ./bench <scenario> [flags]\nscenarios:")
	for _, s := range scenarios {
		fmt.Fprintf(os.Stderr, " %s", s.name)
	}
	fmt.Fprintf(os.Stderr, "\nflags:\n")
	fs.PrintDefaults()
}

// interrupted is set once a signal handler has taken over the exit.
var interrupted atomic.Bool

func main() {
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
	fs.IntVar(&o.n, "n", 0, "relay/fanout: deltas per flood (default 100000 relay, 5000 fanout; quick 20000/1000)")
	fs.IntVar(&o.bytes, "bytes", 0, "relay/fanout: bytes per delta (default 256 relay, 64 fanout)")
	fs.StringVar(&o.clients, "clients", "", "fanout: comma-separated client counts (default 1,10,100)")
	fs.BoolVar(&o.ws, "ws", false, "fanout: attach clients over WebSocket instead of the unix socket")
	fs.IntVar(&o.creates, "creates", 0, "jobs: subagent.create calls per parent count (default 200; quick 100)")
	fs.StringVar(&o.parents, "parents", "", "jobs: comma-separated concurrent parent counts (default 1,16)")
	fs.StringVar(&o.windows, "windows", "", "resync: comma-separated live-window sizes in messages (default 10,1000; quick 10,100)")
	fs.IntVar(&o.samples, "samples", 0, "resync: attach samples per window (default 200; quick 100)")
	fs.Usage = func() { usage(fs) }
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

	start := time.Now()
	rep, err := sc.run(o)
	if err != nil {
		if !interrupted.Load() {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", sc.name, err)
		}
		return 1
	}
	printTable(rep)
	res := result{
		Scenario: sc.name, Started: start.UTC(), Duration: time.Since(start).Round(time.Millisecond).String(),
		Args: args, Quick: o.quick, Fsync: !o.noSync, GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
		Results: rep.Results, Notes: rep.Notes,
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
	fmt.Printf("\nresults written to %s (%s, fsync %v)\n", o.out, res.Duration, res.Fsync)
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
	bin := filepath.Join(dir, "shardd")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/shard-dev/shard/cmd/shardd")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	fmt.Fprintln(os.Stderr, "bench: building shardd …")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build shardd: %w", err)
	}
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
