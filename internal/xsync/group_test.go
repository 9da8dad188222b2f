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
