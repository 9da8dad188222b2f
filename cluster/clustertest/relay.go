package clustertest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Relay is a TCP forwarder on a loopback port the test owns for its
// whole life: the nodes listen on port -1 and their routes point at
// relays, which forward to wherever the node bound. Cutting relays
// partitions a node.
type Relay struct {
	ln   net.Listener
	wg   sync.WaitGroup
	quit chan struct{} // closed by stop

	mu sync.Mutex
	// mu protects the following.
	target  string
	ready   chan struct{} // closed when target is set
	cut     bool
	conns   map[net.Conn]struct{}
	stopped bool
}

func NewRelay(t testing.TB) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{ln: ln, quit: make(chan struct{}), ready: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.acceptLoop()
	t.Cleanup(r.stop)
	return r
}

func (r *Relay) Addr() string { return r.ln.Addr().String() }
func (r *Relay) URL() string  { return "nats://" + r.Addr() }

// SetTarget points the relay at a node's route address (again after a
// restart).
func (r *Relay) SetTarget(a *net.TCPAddr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target == "" {
		close(r.ready)
	}
	r.target = a.String()
}

// SetCut closes every forwarded connection and, while cut, refuses new
// ones: a partition.
func (r *Relay) SetCut(cut bool) {
	r.mu.Lock()
	r.cut = cut
	conns := r.conns
	if cut {
		r.conns = map[net.Conn]struct{}{}
	}
	r.mu.Unlock()
	if cut {
		for c := range conns {
			c.Close()
		}
	}
}

// DropAll closes the forwarded connections once; their dialers may
// come again.
func (r *Relay) DropAll() {
	r.mu.Lock()
	conns := r.conns
	r.conns = map[net.Conn]struct{}{}
	r.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

func (r *Relay) stop() {
	r.mu.Lock()
	if !r.stopped {
		close(r.quit)
	}
	r.stopped = true
	r.mu.Unlock()
	r.ln.Close()
	r.DropAll()
	r.wg.Wait()
}

func (r *Relay) acceptLoop() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.forward(c)
		}()
	}
}

// track adds c to the live connections, unless the relay is cut or
// stopped.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut || r.stopped {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) forward(c net.Conn) {
	if !r.track(c) {
		c.Close()
		return
	}
	r.mu.Lock()
	ready := r.ready
	r.mu.Unlock()
	select { // a node dials its routes before the others bound theirs
	case <-ready:
	case <-r.quit:
		c.Close()
		return
	}
	r.mu.Lock()
	target := r.target
	r.mu.Unlock()
	d, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	if !r.track(d) {
		c.Close()
		d.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(d, c)
	go pipe(c, d)
	<-done
	<-done
}
