package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/shard-dev/shard/internal/clock"
)

func TestManualFiresInDeadlineOrder(t *testing.T) {
	m := clock.NewManual(time.Unix(1000, 0))
	var got []string
	m.AfterFunc(2*time.Second, func() { got = append(got, "b") })
	m.AfterFunc(time.Second, func() { got = append(got, "a") })
	stopped := m.AfterFunc(time.Second, func() { got = append(got, "stopped") })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if n := m.Advance(500 * time.Millisecond); n != 0 {
		t.Fatalf("fired %d timers before any was due", n)
	}
	if n := m.Advance(2 * time.Second); n != 2 {
		t.Fatalf("fired %d timers, want 2", n)
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("fired %v, want [a b]", got)
	}
	if want := time.Unix(1002, 500e6); !m.Now().Equal(want) {
		t.Fatalf("Now = %v, want %v", m.Now(), want)
	}
	if m.Pending() != 0 {
		t.Fatalf("%d timers still pending", m.Pending())
	}
}

func TestManualTimerArmedFromCallback(t *testing.T) {
	m := clock.NewManual(time.Unix(0, 0))
	fired := 0
	var rearm func()
	rearm = func() {
		fired++
		if fired < 3 {
			m.AfterFunc(time.Second, rearm)
		}
	}
	m.AfterFunc(time.Second, rearm)
	for range 3 {
		m.Advance(time.Second)
	}
	if fired != 3 {
		t.Fatalf("fired %d times, want 3", fired)
	}
}

func TestWaitPending(t *testing.T) {
	m := clock.NewManual(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() { done <- m.WaitPending(context.Background(), 2) }()
	m.AfterFunc(time.Minute, func() {})
	m.AfterFunc(time.Minute, func() {})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.WaitPending(ctx, 3); err == nil {
		t.Fatal("WaitPending returned nil with too few timers and a cancelled context")
	}
}
