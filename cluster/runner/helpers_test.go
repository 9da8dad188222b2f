package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/cluster/runner"
	"github.com/shard-dev/shard/internal/testhost"
	"github.com/shard-dev/shard/protocol"
)

// bound is how long a wait may take before the test fails; a passing
// test never waits it out.
const bound = 60 * time.Second

// startNATS starts one in-process NATS server with JetStream (sync
// always, as the cluster's servers run) and returns a connection's
// JetStream. The records package's own tests start three; a runner's
// claims and writes need one, and several runners share it as nodes
// share a cluster.
func startNATS(t *testing.T) jetstream.JetStream {
	js, _ := startNATSServer(t)
	return js
}

// natsServer is a test's server, which it may stop and start again on
// the same port and store (a cluster without quorum, then back).
type natsServer struct {
	t    *testing.T
	opts *server.Options
	s    *server.Server
}

func (n *natsServer) start() {
	n.t.Helper()
	s, err := server.NewServer(n.opts.Clone())
	if err != nil {
		n.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(bound) {
		n.t.Fatal("nats server not ready")
	}
	n.s = s
}

// stop shuts the server down (its clients keep trying to reconnect).
func (n *natsServer) stop() {
	if n.s != nil {
		n.s.Shutdown()
		n.s.WaitForShutdown()
		n.s = nil
	}
}

func startNATSServer(t *testing.T) (jetstream.JetStream, *natsServer) {
	t.Helper()
	n := &natsServer{t: t, opts: &server.Options{ServerName: "S-1", Host: "127.0.0.1", Port: -1,
		JetStream: true, StoreDir: t.TempDir(), SyncAlways: true, NoLog: true, NoSigs: true}}
	n.start()
	t.Cleanup(n.stop)
	// Started again, it takes the port it has now.
	n.opts.Port = n.s.Addr().(*net.TCPAddr).Port
	nc, err := nats.Connect(n.s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, n
}

// openRecords opens the record layer on js for one node.
func openRecords(t *testing.T, js jetstream.JetStream) *records.Records {
	t.Helper()
	rec, err := records.Open(t.Context(), js, records.Options{Replicas: 1, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// gitEnv is the tests' own git environment: a home of the test's, no
// system configuration, an identity for the commits the test makes.
func gitEnv(home string) []string {
	return append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@shard.invalid",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@shard.invalid")
}

// origin is a bare repository standing for the shared remote, and a
// checkout the test plays the parent's node with.
type origin struct {
	t    *testing.T
	bare string
	work string
	home string
	base string // the first commit
}

func newOrigin(t *testing.T) *origin {
	t.Helper()
	testhost.Tool(t, "git")
	dir := t.TempDir()
	o := &origin{t: t, bare: filepath.Join(dir, "origin.git"), work: filepath.Join(dir, "work"), home: filepath.Join(dir, "home")}
	if err := os.MkdirAll(o.home, 0o700); err != nil {
		t.Fatal(err)
	}
	o.git(dir, "init", "-q", "--bare", "-b", "main", o.bare)
	o.git(dir, "clone", "-q", o.bare, o.work)
	if err := os.WriteFile(filepath.Join(o.work, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.git(o.work, "add", "README")
	o.git(o.work, "commit", "-q", "-m", "initial")
	o.git(o.work, "push", "-q", "origin", "HEAD:refs/heads/main")
	o.base = o.git(o.work, "rev-parse", "HEAD")
	return o
}

// git runs git in dir with the test's environment.
func (o *origin) git(dir string, args ...string) string {
	o.t.Helper()
	out, err := o.gitErr(dir, args...)
	if err != nil {
		o.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func (o *origin) gitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(o.home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// branch pushes a run's branch at the base, as the parent's node does.
func (o *origin) branch(name string) *records.RunGit {
	o.git(o.work, "push", "-q", "origin", o.base+":refs/heads/"+name)
	return &records.RunGit{Remote: o.bare, Base: o.base, Branch: name}
}

// show is a file's content on a branch of the remote ("" when absent).
func (o *origin) show(branch, path string) string {
	out, err := o.gitErr(o.bare, "show", "refs/heads/"+branch+":"+path)
	if err != nil {
		return ""
	}
	return out
}

// queue writes a job of n anywhere runs through rec, each on a branch of
// its own, and returns the runs' keys.
func queue(t *testing.T, rec *records.Records, o *origin, jobID string, n int, edit func(i int) records.RunRecord) []string {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("run-%d", i))
	}
	if _, err := rec.Jobs.Create(t.Context(), jobID, records.JobRecord{JobID: jobID, ParentAgentID: "agent-p", ParentNode: "n1",
		Strategy: protocol.StrategyParallel, RunIDs: ids, CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, id := range ids {
		r := records.RunRecord{RunID: id, JobID: jobID, Index: i, Name: fmt.Sprintf("task %d", i), AgentID: "agent-" + id,
			Task: fmt.Sprintf("write file-%d.txt", i), State: protocol.RunQueued, Anywhere: true, QueuedAt: int64(i + 1),
			Git: o.branch("shard/" + jobID + "-" + id), Child: []byte(`{"agent_id":"agent-` + id + `"}`)}
		if edit != nil {
			e := edit(i)
			e.Git, e.RunID, e.JobID, e.State, e.Anywhere, e.AgentID, e.Child = r.Git, r.RunID, r.JobID, r.State, true, r.AgentID, r.Child
			r = e
		}
		if _, err := rec.CreateRun(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, records.RunKey(jobID, id))
	}
	return keys
}

// fakeHost stands for the daemon's host: its leases write a file named by
// the task into the worktree, then end as the test says. It counts the
// leases live at once.
type fakeHost struct {
	mu      sync.Mutex
	live    int
	maxLive int
	leases  map[string]*fakeLease // by run id
	// hold keeps leases running until released (or stopped); else they
	// complete at once.
	hold    bool
	started chan string // each lease's run id once it runs
	failOn  string      // a run whose Start fails
	// stuck leases do not end when stopped: they enter the "term" stage
	// (the runtime ignored the abort) and wait for the test.
	stuck bool
}

func newFakeHost(hold bool) *fakeHost {
	return &fakeHost{leases: map[string]*fakeLease{}, hold: hold, started: make(chan string, 64)}
}

type fakeLease struct {
	h      *fakeHost
	runID  string
	start  chan struct{}
	ended  chan runner.Outcome
	stages chan string
	once   sync.Once
}

func (h *fakeHost) Start(_ context.Context, run records.RunRecord, cwd string) (runner.Lease, error) {
	if run.RunID == h.failOn {
		return nil, fmt.Errorf("no runtime for %s", run.RunID)
	}
	name := strings.TrimPrefix(run.Task, "write ")
	if err := os.WriteFile(filepath.Join(cwd, name), []byte("written by "+run.RunID+"\n"), 0o644); err != nil {
		return nil, err
	}
	l := &fakeLease{h: h, runID: run.RunID, start: make(chan struct{}), ended: make(chan runner.Outcome, 1), stages: make(chan string, 4)}
	h.mu.Lock()
	h.live++
	h.maxLive = max(h.maxLive, h.live)
	h.leases[run.RunID] = l
	h.mu.Unlock()
	close(l.start)
	h.started <- run.RunID
	if !h.hold {
		l.end(runner.Outcome{Completed: true, FinalText: "wrote " + name, Usage: protocol.RunUsage{Input: 3, Output: 2}})
	}
	return l, nil
}

func (h *fakeHost) lease(id string) *fakeLease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leases[id]
}

func (h *fakeHost) max() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxLive
}

func (l *fakeLease) end(o runner.Outcome) {
	l.once.Do(func() {
		l.h.mu.Lock()
		l.h.live--
		l.h.mu.Unlock()
		l.ended <- o
	})
}

func (l *fakeLease) Started() <-chan struct{}     { return l.start }
func (l *fakeLease) Ended() <-chan runner.Outcome { return l.ended }
func (l *fakeLease) Stopping() <-chan string      { return l.stages }
func (l *fakeLease) Stop() {
	if l.h.stuck {
		l.stages <- "term"
		return
	}
	l.end(runner.Outcome{Cancelled: true, StopStage: "abort", Error: "aborted"})
}

// node is one runner of a test, running until the test ends.
type node struct {
	r    *runner.Runner
	host *fakeHost
	root string
}

// startNode runs a runner for name with capacity on its own record layer.
func startNode(t *testing.T, js jetstream.JetStream, name, inc string, capacity int, host *fakeHost) *node {
	t.Helper()
	return startNodeWith(t, js, name, inc, capacity, host, nil, records.Options{})
}

// startNodeWith is startNode with a logger and record options of the
// test's.
func startNodeWith(t *testing.T, js jetstream.JetStream, name, inc string, capacity int, host *fakeHost, log *slog.Logger, ro records.Options) *node {
	t.Helper()
	n := &node{host: host, root: filepath.Join(t.TempDir(), "runs")}
	ro.Replicas, ro.Lease = 1, 3*time.Second
	rec, err := records.Open(t.Context(), js, ro)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Options{
		Records: rec, Node: name, Incarnation: func() string { return inc },
		Capacity: func() int { return capacity }, Host: host, Git: &runner.Git{Root: n.root, Node: name},
		Lease: 3 * time.Second, Logger: log, Retry: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.r = r
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// waitRun waits until the run's record satisfies want and returns it.
func waitRun(t *testing.T, rec *records.Records, key, what string, want func(records.RunRecord) bool) records.RunRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	job, _, _ := strings.Cut(key, ".")
	ch, err := rec.Runs.Watch(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	var last records.RunRecord
	for c := range ch {
		if c.Key == key && !c.Deleted && c.Err == nil {
			last = c.Value
			if want(c.Value) {
				return c.Value
			}
		}
	}
	t.Fatalf("run %s: waited %s for %s; last %+v", key, bound, what, last)
	panic("unreachable")
}

func terminal(r records.RunRecord) bool { return r.State.Terminal() }

func runnerOutcome() runner.Outcome {
	return runner.Outcome{Completed: true, FinalText: "done"}
}

// statMode is a directory's permission bits.
func statMode(path string) (os.FileMode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Mode().Perm(), nil
}

// logSignal is a slog handler that tells a channel each message logged
// (tests wait on what the runner says it did).
type logSignal struct{ ch chan string }

func (l logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (l logSignal) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.ch <- r.Message:
	default:
	}
	return nil
}
func (l logSignal) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logSignal) WithGroup(string) slog.Handler      { return l }
