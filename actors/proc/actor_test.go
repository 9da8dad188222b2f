package proc_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/shard-dev/shard/actors/proc"
	"github.com/shard-dev/shard/internal/logfile"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/internal/xsync"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's dead-letter throttle outlives a burst by one interval.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// probe is a stand-in agent actor that records what the runtime reports.
type probe struct {
	out    chan string
	exited chan *proc.Exited
}

func (p *probe) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *proc.Output:
		for _, l := range m.Lines {
			p.out <- string(l)
		}
	case *proc.Exited:
		p.exited <- m
	}
}

func spawn(t *testing.T, script string) (*actor.ActorSystem, *actor.PID, *probe, string) {
	t.Helper()
	return spawnWith(t, script, func(*proc.Spec) {})
}

// spawnWith is spawn with edit applied to the spec.
func spawnWith(t *testing.T, script string, edit func(*proc.Spec)) (*actor.ActorSystem, *actor.PID, *probe, string) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	p := &probe{out: make(chan string, 100), exited: make(chan *proc.Exited, 1)}
	agentPID := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	dir := t.TempDir()
	logPath := filepath.Join(dir, "logs", "a.log")
	logs, err := logfile.NewMux()
	if err != nil {
		t.Fatal(err)
	}
	spec := proc.Spec{Epoch: 3, Path: "/bin/sh", Args: []string{"-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, StderrPath: logPath, Logs: logs}
	edit(&spec)
	var rt *actor.PID
	// The runtime is the probe's child in the daemon; here a root actor
	// whose Exited goes to the probe.
	g := &xsync.Group{}
	rt = sys.Root.Spawn(proc.Props(spec, agentPID, slog.New(slog.DiscardHandler), g))
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(agentPID).Wait()
		_ = sys.Root.StopFuture(rt).Wait()
		sys.Shutdown()
		g.Close() // the runtime is killed: its goroutines end
		logs.Close()
	})
	return sys, rt, p, logPath
}

func recv[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		var zero T
		return zero
	}
}

func TestOutputInOrderThenExited(t *testing.T) {
	_, _, p, logPath := spawn(t, `echo '{"type":"hello"}'; printf 'a\r\n\n{"type":"b"}\n'; echo oops >&2; exit 3`)
	for _, want := range []string{`{"type":"hello"}`, "a", `{"type":"b"}`} {
		if got := recv(t, p.out); got != want {
			t.Fatalf("output %q, want %q", got, want)
		}
	}
	ex := recv(t, p.exited)
	if ex.Epoch != 3 || ex.ExitCode != 3 || !ex.Started {
		t.Fatalf("exited = %+v", ex)
	}
	select {
	case extra := <-p.out:
		t.Fatalf("output after Exited: %q", extra)
	default:
	}
	b, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(b), "oops") {
		t.Fatalf("stderr log = %q, %v", b, err)
	}
	if fi, _ := os.Stat(logPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("stderr log mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestWriteReachesStdinAndTermEndsTheGroup(t *testing.T) {
	// The child echoes stdin back; a grandchild in its group sleeps.
	sys, rt, p, _ := spawn(t, `sleep 60 & while read l; do echo "$l"; done`)
	sys.Root.Send(rt, &proc.Write{Line: []byte(`{"type":"ping"}`)})
	if got := recv(t, p.out); got != `{"type":"ping"}` {
		t.Fatalf("echo = %q", got)
	}
	// Exited arrives although the grandchild still holds stdout: once the
	// runtime is gone its whole process group is killed.
	sys.Root.Send(rt, &proc.Term{})
	if ex := recv(t, p.exited); !ex.Started {
		t.Fatalf("exited = %+v", ex)
	}
}

// stat is /proc/<pid>/stat of process pid.
func stat(t *testing.T, pid int) procstat.Stat {
	t.Helper()
	st, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// niceOf is the niceness of process pid.
func niceOf(t *testing.T, pid int) int { return stat(t, pid).Nice }

// policyOf is the scheduling policy of process pid.
func policyOf(t *testing.T, pid int) int { return stat(t, pid).Policy }

const schedIdle = 5 // SCHED_IDLE

// TestPriorityCoversTheRuntimeAndWhatItStarts: Spec.Nice, and Spec.Idle
// with it, reach the runtime and a subprocess it starts afterwards
// (inherited), and leave the daemon's own priority and policy alone.
func TestPriorityCoversTheRuntimeAndWhatItStarts(t *testing.T) {
	own, ownPolicy := niceOf(t, os.Getpid()), policyOf(t, os.Getpid())
	for _, idle := range []bool{false, true} {
		t.Run(fmt.Sprintf("idle=%v", idle), func(t *testing.T) {
			want := min(19, own+7)
			// The shell reads a line first, so what it reports is what the
			// actor set after the start; then a subprocess it starts
			// reports its own (inherited).
			sys, rt, p, _ := spawnWith(t, `read l; echo "$$"; sh -c 'echo $$; exec sleep 60' & wait`,
				func(s *proc.Spec) { s.Nice, s.Idle = want, idle })
			sys.Root.Send(rt, &proc.Write{Line: []byte("go")})
			var pids [2]int
			for i := range pids {
				if _, err := fmt.Sscan(recv(t, p.out), &pids[i]); err != nil {
					t.Fatal(err)
				}
			}
			for i, pid := range pids {
				what := []string{"runtime", "its subprocess"}[i]
				if got := niceOf(t, pid); got != want {
					t.Errorf("process %d (%s) runs at nice %d, want %d", pid, what, got, want)
				}
				if got := policyOf(t, pid) == schedIdle; got != idle {
					t.Errorf("process %d (%s): SCHED_IDLE %v, want %v", pid, what, got, idle)
				}
			}
			if n, pol := niceOf(t, os.Getpid()), policyOf(t, os.Getpid()); n != own || pol != ownPolicy {
				t.Errorf("the daemon's own niceness and policy changed to %d, %d from %d, %d", n, pol, own, ownPolicy)
			}
		})
	}
}

func TestKillEndsAProcessThatIgnoresTerm(t *testing.T) {
	sys, rt, p, _ := spawn(t, `trap '' TERM; echo '{"type":"ready"}'; while :; do sleep 1; done`)
	recv(t, p.out)
	sys.Root.Send(rt, &proc.Term{})
	select {
	case ex := <-p.exited:
		t.Fatalf("exited on SIGTERM it ignores: %+v", ex)
	case <-time.After(300 * time.Millisecond):
	}
	sys.Root.Send(rt, &proc.Kill{})
	ex := recv(t, p.exited)
	if ex.Reason != "signal: "+syscall.SIGKILL.String() {
		t.Fatalf("exited = %+v, want killed", ex)
	}
}

func TestSpawnFailureReportsExited(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	p := &probe{out: make(chan string, 1), exited: make(chan *proc.Exited, 1)}
	agentPID := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	defer func() { _ = sys.Root.StopFuture(agentPID).Wait() }()
	sys.Root.Spawn(proc.Props(proc.Spec{Path: "/nonexistent/runtime", Dir: t.TempDir()}, agentPID, slog.New(slog.DiscardHandler), &xsync.Group{}))
	ex := recv(t, p.exited)
	if ex.Started || ex.ExitCode != -1 || !strings.HasPrefix(ex.Reason, "spawn:") {
		t.Fatalf("exited = %+v", ex)
	}
}

// batchProbe records every Output batch as it arrives.
type batchProbe struct {
	batches chan [][]byte
	exited  chan *proc.Exited
}

func (p *batchProbe) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *proc.Output:
		p.batches <- m.Lines
	case *proc.Exited:
		p.exited <- m
	}
}

func spawnBatches(t *testing.T, script string) (*batchProbe, *actor.PID) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	p := &batchProbe{batches: make(chan [][]byte, 100000), exited: make(chan *proc.Exited, 1)}
	agentPID := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	dir := t.TempDir()
	spec := proc.Spec{Epoch: 1, Path: "/bin/sh", Args: []string{"-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}}
	g := &xsync.Group{}
	rt := sys.Root.Spawn(proc.Props(spec, agentPID, slog.New(slog.DiscardHandler), g))
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(agentPID).Wait()
		_ = sys.Root.StopFuture(rt).Wait()
		sys.Shutdown()
		g.Close() // the runtime is killed: its goroutines end
	})
	return p, rt
}

// TestOutputBatches: records written together arrive batched, in order,
// each whole and separately owned (an append to one cannot reach the
// next); blank lines are skipped and a record over the read buffer's size
// (assembled from several reads) arrives whole.
func TestOutputBatches(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	var want []string
	var b strings.Builder
	for i := range 3000 {
		rec := fmt.Sprintf(`{"type":"n","i":%d,"pad":"%s"}`, i, strings.Repeat("x", i%300))
		if i == 1500 {
			rec = `{"type":"big","pad":"` + strings.Repeat("y", 300<<10) + `"}`
		}
		want = append(want, rec)
		b.WriteString(rec + "\n")
		if i%7 == 0 {
			b.WriteString("\n \r\n") // blank lines
		}
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p, _ := spawnBatches(t, "cat "+in)
	var got []string
	batches, multi := 0, 0
	for len(got) < len(want) {
		lines := recv(t, p.batches)
		if len(lines) == 0 {
			t.Fatal("an empty batch")
		}
		batches++
		if len(lines) > 1 {
			multi++
		}
		for i, l := range lines {
			if cap(l) != len(l) {
				t.Fatalf("record %d: cap %d > len %d: it shares its tail", len(got)+i, cap(l), len(l))
			}
		}
		// Appending to one record must leave the others alone.
		for _, l := range lines {
			_ = append(l, "CLOBBER"...)
		}
		for _, l := range lines {
			got = append(got, string(l))
		}
	}
	recv(t, p.exited)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d = %.40q, want %.40q", i, got[i], want[i])
		}
	}
	if multi == 0 {
		t.Errorf("%d records came in %d batches, none with more than one record", len(got), batches)
	}
}

// TestOutputBatchDoesNotWait: a batch never waits for a partial line: the
// records before it arrive at once.
func TestOutputBatchDoesNotWait(t *testing.T) {
	p, _ := spawnBatches(t, `printf '{"type":"a"}\n{"type":"b"}\n\n{"type":"par'; sleep 5; printf 'tial"}\n'`)
	var got []string
	deadline := time.After(3 * time.Second)
	for len(got) < 2 {
		select {
		case lines := <-p.batches:
			for _, l := range lines {
				got = append(got, string(l))
			}
		case <-deadline:
			t.Fatalf("records before a partial line held back: got %q", got)
		}
	}
	if got[0] != `{"type":"a"}` || got[1] != `{"type":"b"}` || len(got) != 2 {
		t.Fatalf("got %q", got)
	}
}

// TestRefusedGoroutinesKillTheProcess: with its goroutine group closed
// (the daemon stopping), a runtime actor starts no goroutine, kills the
// process it started and reports it as never started.
func TestRefusedGoroutinesKillTheProcess(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	p := &probe{out: make(chan string, 1), exited: make(chan *proc.Exited, 1)}
	agentPID := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	defer func() { _ = sys.Root.StopFuture(agentPID).Wait() }()
	g := &xsync.Group{}
	g.Close()
	spec := proc.Spec{Path: "/bin/sh", Args: []string{"-c", "sleep 60"}, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}
	rt := sys.Root.Spawn(proc.Props(spec, agentPID, slog.New(slog.DiscardHandler), g))
	defer func() { _ = sys.Root.StopFuture(rt).Wait() }()
	ex := recv(t, p.exited)
	if ex.Started || ex.ExitCode != -1 || ex.Reason != "spawn: the daemon is stopping" {
		t.Fatalf("exited = %+v", ex)
	}
}

// TestStderrLogRotatesWhileTheRuntimeRuns: the child's stderr reaches its
// log through the copy (the daemon's Mux, or a goroutine of the runtime's
// own without one), which rotates it by size while the child is still
// running, keeps LogBackups old files, and holds each within LogMaxBytes.
func TestStderrLogRotatesWhileTheRuntimeRuns(t *testing.T) {
	t.Run("mux", func(t *testing.T) { testStderrLogRotates(t, func(*proc.Spec) {}) })
	t.Run("goroutine", func(t *testing.T) { testStderrLogRotates(t, func(s *proc.Spec) { s.Logs = nil }) })
}

func testStderrLogRotates(t *testing.T, edit func(*proc.Spec)) {
	const maxBytes, backups = 4096, 2
	// 256 KiB of 64-byte lines to stderr, then a mark on stdout, then the
	// child waits on stdin (still running) until it is told to end.
	script := `i=0; while [ $i -lt 4096 ]; do printf '%063d\n' $i >&2; i=$((i+1)); done; echo written; read l; echo last >&2`
	sys, rt, p, logPath := spawnWith(t, script, func(s *proc.Spec) { s.LogMaxBytes, s.LogBackups = maxBytes, backups; edit(s) })
	if got := recv(t, p.out); got != "written" {
		t.Fatalf("output %q, want written", got)
	}
	// The child's writes returned, so all but a pipe's buffer (64 KiB) and
	// one read (4 KiB) of its 256 KiB went into the log: it rotated more
	// than `backups` times already, while the child runs (and may still
	// be rotating: a backup, once there, stays there throughout).
	for i := 1; i <= backups; i++ {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", logPath, i)); err != nil {
			t.Fatalf("backup %d while running: %v", i, err)
		}
	}
	sys.Root.Send(rt, &proc.Write{Line: []byte("go")})
	if ex := recv(t, p.exited); ex.ExitCode != 0 {
		t.Fatalf("exited = %+v", ex)
	}
	// Exited comes after the copy ended: the last line is in the live log.
	entries, err := os.ReadDir(filepath.Dir(logPath))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > maxBytes {
			t.Errorf("%s has %d bytes, over the %d-byte bound", e.Name(), fi.Size(), maxBytes)
		}
	}
	if want := []string{"a.log", "a.log.1", "a.log.2"}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("log files %v, want %v", names, want)
	}
	if b, _ := os.ReadFile(logPath); !strings.HasSuffix(string(b), "last\n") {
		t.Fatalf("live log ends %q, want the child's last line", b[max(0, len(b)-80):])
	}
}
