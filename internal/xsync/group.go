package xsync

import (
	"fmt"
	"runtime/debug"
	"sync"
)

// Group owns goroutines. The zero value is ready to use. A Group is safe
// for concurrent use; Go may be called from inside a goroutine of the same
// group.
type Group struct {
	// OnPanic, when set, is told about a goroutine that panicked (the
	// panic value and stack as an error); the goroutine has ended, the
	// daemon goes on. Set it before the first Go.
	OnPanic func(err error)

	wg sync.WaitGroup
	// mu protects the following.
	mu     sync.Mutex
	closed bool
}

// Go runs f in a new goroutine that Wait waits for. It reports false, and
// does not run f, once Close has been called: whoever asked for the work
// must treat it as refused (an actor shutting down, a daemon stopping).
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		defer func() {
			if v := recover(); v != nil && g.OnPanic != nil {
				g.OnPanic(fmt.Errorf("xsync: goroutine panicked: %v\n%s", v, debug.Stack()))
			} else if v != nil {
				panic(v) // nobody to tell: keep the default behaviour
			}
		}()
		f()
	}()
	return true
}

// Begin counts work that runs elsewhere, not in a goroutine of the group
// (a store write whose callback answers an actor), as one of its
// goroutines until end is called: Close and Wait wait for it. It reports
// false, and counts nothing, once Close has been called, as Go does.
func (g *Group) Begin() (end func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, false
	}
	g.wg.Add(1)
	var once sync.Once
	return func() { once.Do(g.wg.Done) }, true
}

// Close refuses new goroutines and waits for those running. It is
// idempotent.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// Wait waits for the goroutines running now (and those they start) to end,
// without refusing new ones.
func (g *Group) Wait() { g.wg.Wait() }
