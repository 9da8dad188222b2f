package mailrun

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// recv waits for a value on ch (a hang guard of 10 s).
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		var zero T
		t.Fatalf("no %T arrived", zero)
		return zero
	}
}

// goid identifies the calling goroutine (its stack trace's header).
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	var id int
	fmt.Sscanf(string(buf), "goroutine %d ", &id)
	return fmt.Sprint(id)
}

// waitInSelect waits until goroutine id is blocked in a select (a hang
// guard of 10 s), read from the stacks of all goroutines.
func waitInSelect(t *testing.T, id string) {
	t.Helper()
	want := []byte("goroutine " + id + " [select")
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if bytes.Contains(buf[:runtime.Stack(buf, true)], want) {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("goroutine %s never waited in its select", id)
}

// A run that ends parks its goroutine, and the next run goes to it.
func TestARunGoesToTheParkedGoroutine(t *testing.T) {
	p := New(300, 4, time.Hour)
	defer p.Close()
	parked := make(chan struct{}, 10)
	p.parked = func() { parked <- struct{}{} }
	ids := make(chan string, 2)
	p.Schedule(func() { ids <- goid() })
	first := recv(t, ids)
	recv(t, parked)
	// The parked hook runs just before the goroutine's select; Schedule
	// hands over only to a goroutine already waiting in it.
	waitInSelect(t, first)
	p.Schedule(func() { ids <- goid() })
	if second := recv(t, ids); second != first {
		t.Fatalf("the second run ran on goroutine %s, not on the parked %s", second, first)
	}
}

// Runs never wait for each other: while one run blocks, the next one
// starts on a goroutine of its own.
func TestARunNeverWaitsForAnother(t *testing.T) {
	p := New(300, 4, time.Hour)
	defer p.Close()
	release := make(chan struct{})
	blocked := make(chan struct{})
	p.Schedule(func() { close(blocked); <-release })
	recv(t, blocked)
	ran := make(chan struct{})
	p.Schedule(func() { close(ran) })
	recv(t, ran)
	close(release)
}

// No more than maxIdle goroutines stay parked; the others end after their
// run. Close ends the parked ones.
func TestParkedGoroutinesAreBounded(t *testing.T) {
	p := New(300, 1, time.Hour)
	parked, exited := make(chan struct{}, 10), make(chan struct{}, 10)
	p.parked = func() { parked <- struct{}{} }
	p.exited = func() { exited <- struct{}{} }
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	for range 3 {
		p.Schedule(func() { started <- struct{}{}; <-release })
	}
	for range 3 {
		recv(t, started)
	}
	close(release)
	recv(t, parked)
	recv(t, exited)
	recv(t, exited)
	select {
	case <-parked:
		t.Fatal("a second goroutine parked with maxIdle 1")
	default:
	}
	p.Close()
	recv(t, exited)
	// After Close a run still runs, on a goroutine that then ends.
	ran := make(chan struct{})
	p.Schedule(func() { close(ran) })
	recv(t, ran)
	recv(t, exited)
}

// orderActor records the values it receives and answers a query with them.
type orderActor struct{ got []int }

type query struct{}

func (a *orderActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case int:
		a.got = append(a.got, m)
	case query:
		c.Respond(a.got)
	}
}

// Actors on a Pool get every message once and in order, many actors at a
// time, with mailboxes that yield (throughput 10) in the middle.
func TestActorsOnAPoolKeepTheirOrder(t *testing.T) {
	p := New(10, 2, time.Hour)
	defer p.Close()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer sys.Shutdown()
	const actors, msgs = 8, 1000
	var pids []*actor.PID
	for range actors {
		pids = append(pids, sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &orderActor{} },
			actor.WithDispatcher(p))))
	}
	for i := range msgs {
		for _, pid := range pids {
			sys.Root.Send(pid, i)
		}
	}
	for _, pid := range pids {
		res, err := sys.Root.RequestFuture(pid, query{}, 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		got := res.([]int)
		if len(got) != msgs {
			t.Fatalf("%s got %d messages, want %d", pid.Id, len(got), msgs)
		}
		for i, v := range got {
			if v != i {
				t.Fatalf("%s got %d as message %d", pid.Id, v, i)
			}
		}
	}
}

// A parked goroutine ends once it has waited linger without a run: a
// daemon at rest keeps none.
func TestAParkedGoroutineEndsAfterItsLinger(t *testing.T) {
	p := New(300, 4, time.Millisecond)
	defer p.Close()
	parked, exited := make(chan struct{}, 10), make(chan struct{}, 10)
	p.parked = func() { parked <- struct{}{} }
	p.exited = func() { exited <- struct{}{} }
	ran := make(chan struct{})
	p.Schedule(func() { close(ran) })
	recv(t, ran)
	recv(t, parked)
	recv(t, exited)
	if n := p.idle.Load(); n != 0 {
		t.Fatalf("%d goroutines counted parked after the linger, want 0", n)
	}
}
