package xsync_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shard-dev/shard/internal/xsync"
)

func TestGroupWaitsAndRefusesAfterClose(t *testing.T) {
	var g xsync.Group
	var n atomic.Int32
	release := make(chan struct{})
	for range 3 {
		if !g.Go(func() { <-release; n.Add(1) }) {
			t.Fatal("Go refused before Close")
		}
	}
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while goroutines were running")
	default:
	}
	close(release)
	<-closed
	if got := n.Load(); got != 3 {
		t.Fatalf("ran %d goroutines, want 3", got)
	}
	if g.Go(func() { t.Error("ran after Close") }) {
		t.Fatal("Go accepted after Close")
	}
	g.Close() // idempotent
}

func TestGroupRecoversPanics(t *testing.T) {
	got := make(chan error, 1)
	g := xsync.Group{OnPanic: func(err error) { got <- err }}
	g.Go(func() { panic(errors.New("boom")) })
	g.Wait()
	err := <-got
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("OnPanic got %v, want the panic value", err)
	}
}

// Work counted with Begin holds Close until its end is called (once, however
// often end runs); after Close, Begin refuses.
func TestGroupBeginHoldsCloseUntilEnd(t *testing.T) {
	var g xsync.Group
	end, ok := g.Begin()
	if !ok {
		t.Fatal("Begin refused on an open group")
	}
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	// Close waits for end: a Begin that races it is refused or counted,
	// and a refused one proves Close has begun.
	for {
		e, ok := g.Begin()
		if !ok {
			break
		}
		e()
	}
	select {
	case <-closed:
		t.Fatal("Close returned before end")
	default:
	}
	end()
	end() // idempotent: a second call must not drive the count negative
	<-closed
	if _, ok := g.Begin(); ok {
		t.Fatal("Begin accepted after Close")
	}
}
