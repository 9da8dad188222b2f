//go:build linux

package attend_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/team/attend"
)

// waitBound bounds every wait for an event or a command; they normally end
// in milliseconds, the machine may be busy.
const waitBound = 60 * time.Second

// ctxFor is a context bounded by waitBound, ended with t.
func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	t.Cleanup(cancel)
	return ctx
}

// startDaemon runs the real shardd (its agents on the real runtime under
// the sim model) on a fresh home; it is reaped when t ends.
func startDaemon(t *testing.T) *shardtest.Daemon {
	t.Helper()
	home := filepath.Join(shardtest.ShortTemp(t, "at"), "home")
	stderr := &shardtest.Buffer{}
	d, err := shardtest.StartDaemon(shardtest.DaemonOptions{
		Shardd: sharddBin, Home: home,
		Args:   []string{"--web-port", "0", "--store.no-sync"},
		Stderr: stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Reap()
		if t.Failed() {
			t.Logf("shardd stderr:\n%s", shardtest.Tail(stderr.String(), 8000))
			if log, err := d.Log(16000); err == nil {
				t.Logf("shardd.log:\n%s", log)
			}
		}
	})
	if err := d.WaitReady(waitBound); err != nil {
		t.Fatal(err)
	}
	return d
}

// dial is a connection of the test's own, its events drained; closed when
// t ends.
func dial(t *testing.T, d *shardtest.Daemon) *client.Conn {
	t.Helper()
	c, err := client.Dial(ctxFor(t), d.Socket())
	if err != nil {
		t.Fatal(err)
	}
	drain(t, c)
	return c
}

// drain reads c's events until it closes, and closes it when t ends.
func drain(t *testing.T, c *client.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for range c.Events() {
		}
	})
	t.Cleanup(func() {
		c.Close()
		wg.Wait()
	})
}

// createAgent makes a durable agent in a fresh directory: the lead of the
// tests.
func createAgent(t *testing.T, c *client.Conn) (id, cwd string) {
	t.Helper()
	cwd = shardtest.ShortTemp(t, "cwd")
	var data protocol.AgentCreateData
	if err := c.Call(ctxFor(t), &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd, Name: "lead"}, &data); err != nil {
		t.Fatalf("agent.create: %v", err)
	}
	return data.AgentID, cwd
}

// watch is a Watcher under test: every event it reported, and the
// connections its Dial made.
type watch struct {
	*attend.Watcher
	t      *testing.T
	cursor int // next reads events from here

	// mu protects the following.
	mu    sync.Mutex
	hist  []attend.Event
	more  chan struct{} // closed and replaced at each event
	conn  *client.Conn  // the latest connection Dial made
	gate  chan struct{} // non-nil: Dial waits for it to close
	dials int
}

// startWatch watches agentID on d; the Watcher is closed when t ends,
// after which Stopped must have been its last event.
func startWatch(t *testing.T, d *shardtest.Daemon, agentID string) *watch {
	t.Helper()
	x := &watch{t: t, more: make(chan struct{})}
	w, err := attend.Watch(context.Background(), attend.Options{
		AgentID: agentID,
		Events:  x.event,
		Dial: func(ctx context.Context) (*client.Conn, error) {
			x.mu.Lock()
			gate := x.gate
			x.dials++
			x.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			c, err := client.Dial(ctx, d.Socket())
			if err == nil {
				x.mu.Lock()
				x.conn = c
				x.mu.Unlock()
			}
			return c, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	x.Watcher = w
	t.Cleanup(func() {
		w.Close()
		x.mu.Lock()
		defer x.mu.Unlock()
		if _, ok := x.hist[len(x.hist)-1].(attend.Stopped); !ok {
			t.Errorf("last event after Close = %#v, want Stopped", x.hist[len(x.hist)-1])
		}
	})
	return x
}

// event is the Watcher's Events callback: it records and never blocks.
func (x *watch) event(ev attend.Event) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.hist = append(x.hist, ev)
	close(x.more)
	x.more = make(chan struct{})
}

// wait returns the first event from index from on that pred takes, and
// its index, waiting for it up to waitBound.
func (x *watch) wait(what string, from int, pred func(attend.Event) bool) (attend.Event, int) {
	x.t.Helper()
	deadline := time.NewTimer(waitBound)
	defer deadline.Stop()
	for {
		x.mu.Lock()
		hist, more := x.hist, x.more
		x.mu.Unlock()
		for i := from; i < len(hist); i++ {
			if pred(hist[i]) {
				return hist[i], i
			}
		}
		from = len(hist)
		select {
		case <-more:
		case <-deadline.C:
			x.t.Fatalf("no %s within %s; events: %s", what, waitBound, describe(hist))
		}
	}
}

// next is the first event pred takes after the last one next returned.
func (x *watch) next(what string, pred func(attend.Event) bool) attend.Event {
	x.t.Helper()
	ev, i := x.wait(what, x.cursor, pred)
	x.cursor = i + 1
	return ev
}

// find is the first event pred takes, among all (it does not move next).
func (x *watch) find(what string, pred func(attend.Event) bool) attend.Event {
	x.t.Helper()
	ev, _ := x.wait(what, 0, pred)
	return ev
}

// hold makes the next dials wait until the returned release is called.
func (x *watch) hold() (release func()) {
	gate := make(chan struct{})
	x.mu.Lock()
	x.gate = gate
	x.mu.Unlock()
	return func() {
		x.mu.Lock()
		x.gate = nil
		x.mu.Unlock()
		close(gate)
	}
}

// drop closes the Watcher's current connection, as a lost one.
func (x *watch) drop() {
	x.mu.Lock()
	c := x.conn
	x.mu.Unlock()
	c.Close()
}

// nextRequest is the next Request of kind.
func (x *watch) nextRequest(kind string) attend.Request {
	x.t.Helper()
	return x.next(kind+" request", func(ev attend.Event) bool {
		r, ok := ev.(attend.Request)
		return ok && r.Kind == kind
	}).(attend.Request)
}

// nextResolved is the next Resolved of request id.
func (x *watch) nextResolved(id string) attend.Resolved {
	x.t.Helper()
	return x.next("resolution of "+id, func(ev attend.Event) bool {
		r, ok := ev.(attend.Resolved)
		return ok && r.RequestID == id
	}).(attend.Resolved)
}

// nextSynced is the next Synced.
func (x *watch) nextSynced() attend.Synced {
	x.t.Helper()
	return x.next("sync", func(ev attend.Event) bool {
		_, ok := ev.(attend.Synced)
		return ok
	}).(attend.Synced)
}

// describe lists events by type, for a failure message.
func describe(hist []attend.Event) string {
	var b strings.Builder
	for _, ev := range hist {
		switch e := ev.(type) {
		case attend.Request:
			b.WriteString("Request(" + e.Kind + " " + e.RequestID + ") ")
		case attend.Resolved:
			b.WriteString("Resolved(" + e.RequestID + " " + e.Source + ") ")
		case attend.RunChanged:
			b.WriteString("RunChanged(" + string(e.State) + ") ")
		case attend.Status:
			b.WriteString("Status(" + string(e.Status) + ") ")
		case attend.Detached:
			b.WriteString("Detached(" + errString(e.Err) + ") ")
		case attend.Stopped:
			b.WriteString("Stopped(" + errString(e.Err) + ") ")
		default:
			b.WriteString(strings.TrimPrefix(fmt.Sprintf("%T", ev), "attend.") + " ")
		}
	}
	return b.String()
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
