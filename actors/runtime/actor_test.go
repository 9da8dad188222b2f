package runtime_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/shard-dev/shard/actors/runtime"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's dead-letter throttle outlives a burst by one interval.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// probe is a stand-in agent actor that records what the runtime reports.
type probe struct {
	out    chan string
	exited chan *runtime.Exited
}

func (p *probe) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *runtime.Output:
		p.out <- string(m.Line)
	case *runtime.Exited:
		p.exited <- m
	}
}

func spawn(t *testing.T, script string) (*actor.ActorSystem, *actor.PID, *probe, string) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	p := &probe{out: make(chan string, 100), exited: make(chan *runtime.Exited, 1)}
	agentPID := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	dir := t.TempDir()
	logPath := filepath.Join(dir, "logs", "a.log")
	spec := runtime.Spec{Epoch: 3, Path: "/bin/sh", Args: []string{"-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, StderrPath: logPath}
	var rt *actor.PID
	// The runtime is the probe's child in the daemon; here a root actor
	// whose Exited goes to the probe.
	rt = sys.Root.Spawn(runtime.Props(spec, agentPID, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(agentPID).Wait()
		_ = sys.Root.StopFuture(rt).Wait()
		sys.Shutdown()
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
	sys.Root.Send(rt, &runtime.Write{Line: []byte(`{"type":"ping"}`)})
	if got := recv(t, p.out); got != `{"type":"ping"}` {
		t.Fatalf("echo = %q", got)
	}
	// Exited arrives although the grandchild still holds stdout: once the
	// runtime is gone its whole process group is killed.
	sys.Root.Send(rt, &runtime.Term{})
	if ex := recv(t, p.exited); !ex.Started {
		t.Fatalf("exited = %+v", ex)
	}
}

func TestKillEndsAProcessThatIgnoresTerm(t *testing.T) {
	sys, rt, p, _ := spawn(t, `trap '' TERM; echo '{"type":"ready"}'; while :; do sleep 1; done`)
	recv(t, p.out)
	sys.Root.Send(rt, &runtime.Term{})
	select {
	case ex := <-p.exited:
		t.Fatalf("exited on SIGTERM it ignores: %+v", ex)
	case <-time.After(300 * time.Millisecond):
	}
	sys.Root.Send(rt, &runtime.Kill{})
	ex := recv(t, p.exited)
	if ex.Reason != "signal: "+syscall.SIGKILL.String() {
		t.Fatalf("exited = %+v, want killed", ex)
	}
}

func TestSpawnFailureReportsExited(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	p := &probe{out: make(chan string, 1), exited: make(chan *runtime.Exited, 1)}
	agentPID := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	defer func() { _ = sys.Root.StopFuture(agentPID).Wait() }()
	sys.Root.Spawn(runtime.Props(runtime.Spec{Path: "/nonexistent/runtime", Dir: t.TempDir()}, agentPID, slog.New(slog.DiscardHandler)))
	ex := recv(t, p.exited)
	if ex.Started || ex.ExitCode != -1 || !strings.HasPrefix(ex.Reason, "spawn:") {
		t.Fatalf("exited = %+v", ex)
	}
}
