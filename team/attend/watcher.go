package attend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
)

// Defaults of Options.
const (
	// DefaultMinBackoff is the wait before the second attempt to attach
	// after a loss (the first is at once): a daemon restart takes well
	// under a second.
	DefaultMinBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff caps the waits, which double from MinBackoff.
	DefaultMaxBackoff = 5 * time.Second
	// DialTimeout bounds one Dial (connect and hello).
	DialTimeout = 10 * time.Second
	// recentMax is how many closed requests a Watcher remembers, to tell
	// an answer that came too late (CONFLICT) from one to a request it
	// never saw (NOT_FOUND).
	recentMax = 256
)

// Options configure Watch.
type Options struct {
	// Dial connects to the daemon (client.Dial on its unix socket, for
	// example); the Watcher owns and closes what it returns. It is called
	// again after each loss. Required.
	Dial func(ctx context.Context) (*client.Conn, error)
	// AgentID is the agent to attach to as an interactive client: a
	// team's lead. Required.
	AgentID string
	// Events receives what the Watcher sees, in order, from one goroutine
	// at a time; Stopped is the last. Required.
	//
	// It must return quickly and never block on the Watcher: while it
	// runs, the daemon's records pile up in the connection's buffer
	// (client.EventBuffer); once that is full nothing more is read,
	// responses included (so this Watcher's commands wait), and the
	// daemon drops a client that stops reading (docs/protocol.md §6.2).
	// Forward the event (to an actor's mailbox) and return; never call a
	// Watcher method that waits (a command, Close) from it. A panic in it
	// stops the Watcher, with the panic as Stopped.Err.
	Events func(Event)
	// MinBackoff and MaxBackoff pace reattaching: the first attempt after
	// a loss is at once, the next after MinBackoff, then doubling up to
	// MaxBackoff. Defaults DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
}

// Watcher is one interactive attachment to an agent that survives dropped
// connections: it reports the agent's requests and its own descendants'
// (delegated to it), and answers them, prompts and steers the agent.
//
// A Watcher is safe for concurrent use. Its commands (Prompt, Steer,
// AnswerPermission, AnswerQuestion) block on the network: call them from
// a goroutine of your own, never from an actor's mailbox or from
// Options.Events. While detached, a command waits until the Watcher is
// attached again, its ctx ends or the Watcher stops.
type Watcher struct {
	opts   Options
	cancel context.CancelFunc
	group  xsync.Group
	done   chan struct{} // closed when the Watcher has stopped

	// mu protects the following.
	mu sync.Mutex
	// link is the attachment commands use; nil while detached. linked is
	// closed when a link is set, and replaced when it is lost.
	link   *link
	linked chan struct{}
	// open are the requests reported and not yet resolved, by request id
	// (ids are unique across the agents of a hierarchy: each runtime
	// mints them with a nonce of its own).
	open map[string]*openRequest
	// recent are the last recentMax resolutions, oldest first.
	recent   []Resolved
	everSync bool  // a sync was handled: later ones are Reattached
	err      error // why the Watcher stopped
	panicked error // a panic that stops the Watcher
}

// link is one connection's attachment.
type link struct {
	conn *client.Conn
	lost chan struct{} // closed when the attachment ends
}

// openRequest is a reported request no resolution has closed yet.
type openRequest struct {
	req  Request
	perm *protocol.PermissionRequest // the request as received (permission)
	// sent is this Watcher's answer, once it sent one.
	sent *sentAnswer
	// done is closed with res set once the request is resolved.
	done chan struct{}
	res  Resolved
}

// Watch attaches to o.AgentID as an interactive client, in the
// background: it returns at once, and the attachment is reported to
// o.Events (Synced, then the open requests). The Watcher runs until ctx
// ends, Close is called, or the daemon refuses the attach for good (the
// agent does not exist); Stopped is then its last event. Watch fails only
// on incomplete Options.
func Watch(ctx context.Context, o Options) (*Watcher, error) {
	if o.Dial == nil || o.AgentID == "" || o.Events == nil {
		return nil, fmt.Errorf("%w: Dial, AgentID and Events are required", ErrInvalidOptions)
	}
	o.MinBackoff = cmp.Or(o.MinBackoff, DefaultMinBackoff)
	o.MaxBackoff = max(cmp.Or(o.MaxBackoff, DefaultMaxBackoff), o.MinBackoff)
	ctx, cancel := context.WithCancel(ctx)
	w := &Watcher{
		opts: o, cancel: cancel, done: make(chan struct{}),
		linked: make(chan struct{}), open: map[string]*openRequest{},
	}
	w.group.OnPanic = w.fail
	w.group.Go(func() { w.run(ctx) })
	return w, nil
}

// Close stops the Watcher (its connection is closed, which detaches it)
// and waits until Stopped was reported. It is idempotent; never call it
// from Options.Events.
func (w *Watcher) Close() {
	w.cancel()
	w.group.Close()
}

// Done is closed once the Watcher has stopped.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Err is why the Watcher stopped (as Stopped.Err), nil while it runs.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// run attaches, and attaches again after each loss, until ctx ends or the
// agent is gone.
func (w *Watcher) run(ctx context.Context) {
	wait := time.Duration(0)
	var err error
	for {
		var synced bool
		synced, err = w.session(ctx)
		if ctx.Err() != nil {
			err = ctx.Err()
			break
		}
		if errors.Is(err, errGone) {
			break
		}
		w.emit(Detached{Err: err})
		if synced {
			wait = 0
		}
		if !clock.Sleep(ctx, wait) {
			err = ctx.Err()
			break
		}
		wait = min(max(2*wait, w.opts.MinBackoff), w.opts.MaxBackoff)
	}
	w.mu.Lock()
	if w.panicked != nil {
		err = w.panicked
	}
	w.err = err
	w.mu.Unlock()
	close(w.done)
	w.emit(Stopped{Err: err})
}

// emit hands ev to Options.Events. A panic there stops the Watcher, with
// the panic as its Err, rather than the process.
func (w *Watcher) emit(ev Event) {
	defer func() {
		if v := recover(); v != nil {
			w.fail(fmt.Errorf("attend: Events panicked on %T: %v", ev, v))
		}
	}()
	w.opts.Events(ev)
}

// fail stops the Watcher because of err (the first one counts).
func (w *Watcher) fail(err error) {
	w.mu.Lock()
	if w.panicked == nil {
		w.panicked = err
	}
	w.mu.Unlock()
	w.cancel()
}

// errGone marks an attach refusal that ends the Watcher: the agent does
// not exist (any more), or this connection may not attach to it. Other
// failures (a dial, a runtime that did not start) are tried again.
var errGone = errors.New("attend: the agent cannot be attached")

// refusal is err, marked errGone when the daemon refused an attach for
// good.
func refusal(err error) error {
	switch protocol.CodeOf(err) {
	case protocol.CodeNotFound, protocol.CodePermissionDenied:
		return fmt.Errorf("%w: %w", errGone, err)
	}
	return err
}

// session is one connection: dial, attach, read until it ends. synced
// reports whether the agent's sync arrived on it (the attachment was
// made); err is why it ended.
func (w *Watcher) session(ctx context.Context) (synced bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	conn, err := w.opts.Dial(dctx)
	cancel()
	if err != nil {
		return false, fmt.Errorf("attend: dial: %w", err)
	}
	lk := &link{conn: conn, lost: make(chan struct{})}
	readerDone := make(chan struct{})
	var gotSync bool
	if !w.group.Go(func() {
		defer close(readerDone)
		gotSync = w.read(lk)
	}) {
		conn.Close()
		return false, ErrStopped
	}
	defer func() {
		w.unlink(lk)
		conn.Close() // ends the reader
		<-readerDone
		synced = gotSync
	}()
	if err := w.attach(ctx, conn); err != nil {
		return false, err
	}
	select {
	case <-readerDone:
		return false, fmt.Errorf("attend: connection lost: %w", conn.Err())
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// attach is agent.attach as the interactive client, then subagent.status
// of the agent's jobs, which subscribes this connection to the agent's
// subagent_run_changed (the daemon sends them to the connections that
// speak for a parent through subagent.*, docs/protocol.md §10.3).
func (w *Watcher) attach(ctx context.Context, conn *client.Conn) error {
	att := &protocol.AgentAttach{
		Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: w.opts.AgentID},
		Role:   protocol.RoleInteractive,
	}
	if _, err := conn.Request(ctx, att); err != nil {
		return refusal(fmt.Errorf("attend: attach %s: %w", w.opts.AgentID, err))
	}
	st := &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: w.opts.AgentID}
	if _, err := conn.Request(ctx, st); err != nil {
		return refusal(fmt.Errorf("attend: subagent.status of %s: %w", w.opts.AgentID, err))
	}
	return nil
}

// read handles lk's events until the connection ends; it reports whether
// a sync of the agent arrived.
func (w *Watcher) read(lk *link) (synced bool) {
	for ev := range lk.conn.Events() {
		if s, ok := ev.Msg.(*protocol.Sync); ok && s.AgentID == w.opts.AgentID {
			w.onSync(lk, s)
			synced = true
			continue
		}
		w.handle(ev.Msg)
	}
	return synced
}

// unlink ends lk: commands waiting on it learn they are detached.
func (w *Watcher) unlink(lk *link) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-lk.lost:
		return
	default:
	}
	close(lk.lost)
	if w.link == lk {
		w.link = nil
		w.linked = make(chan struct{})
	}
}

// onSync reconciles the open requests with a sync: those it lacks were
// resolved meanwhile (Missed), those it has are reported (Resync). The
// first sync of a connection makes it the link commands use.
func (w *Watcher) onSync(lk *link, s *protocol.Sync) {
	var reqs []Request
	perms := map[string]*protocol.PermissionRequest{}
	for _, raw := range s.PendingRequests {
		msg, err := protocol.DecodeEvent(raw)
		if err != nil {
			continue
		}
		switch m := msg.(type) {
		case *protocol.PermissionRequest:
			r := permissionRequest(cmp.Or(m.AgentID, w.opts.AgentID), m)
			r.Resync = true
			reqs = append(reqs, r)
			perms[r.RequestID] = m
		case *protocol.UIRequest:
			if m.Kind != protocol.UINotify {
				r := questionRequest(cmp.Or(m.AgentID, w.opts.AgentID), m)
				r.Resync = true
				reqs = append(reqs, r)
			}
		}
	}

	w.mu.Lock()
	reattached := w.everSync
	w.everSync = true
	var missed []Resolved
	for id, o := range w.open {
		if !slices.ContainsFunc(reqs, func(r Request) bool { return r.RequestID == id }) {
			missed = append(missed, w.closeLocked(o, Resolved{
				AgentID: o.req.AgentID, RequestID: id, Kind: o.req.Kind, Missed: true}))
		}
	}
	for _, r := range reqs {
		w.trackLocked(r, perms[r.RequestID])
	}
	if w.link != lk {
		select {
		case <-lk.lost: // already ended: nothing to link
		default:
			w.link = lk
			close(w.linked)
		}
	}
	w.mu.Unlock()

	slices.SortFunc(missed, func(a, b Resolved) int { return cmp.Compare(a.RequestID, b.RequestID) })
	w.emit(Synced{AgentID: w.opts.AgentID, Status: s.Status, RuntimeEpoch: s.RuntimeEpoch, Reattached: reattached})
	for _, res := range missed {
		w.emit(res)
	}
	for _, r := range reqs {
		w.emit(r)
	}
}

// handle reports one event of the connection (not a sync of the agent).
func (w *Watcher) handle(msg protocol.Typed) {
	lead := w.opts.AgentID
	switch m := msg.(type) {
	case *protocol.PermissionRequest:
		r := permissionRequest(cmp.Or(m.AgentID, lead), m)
		w.track(r, m)
		w.emit(r)
	case *protocol.UIRequest:
		if m.Kind == protocol.UINotify {
			w.emit(Notice{AgentID: cmp.Or(m.AgentID, lead), RequestID: m.RequestID,
				Title: m.Title, Message: m.Message, NotifyType: m.NotifyType})
			return
		}
		r := questionRequest(cmp.Or(m.AgentID, lead), m)
		w.track(r, nil)
		w.emit(r)
	case *protocol.PermissionResolved:
		if res, ok := w.resolve(m.RequestID, func(o *openRequest) Resolved { return resolvedPermission(o.req, m) }); ok {
			w.emit(res)
		}
	case *protocol.UIResolved:
		if res, ok := w.resolve(m.RequestID, func(o *openRequest) Resolved { return resolvedQuestion(o.req, m) }); ok {
			w.emit(res)
		}
	case *protocol.SubagentRunChanged:
		if m.ParentAgentID == lead {
			w.emit(RunChanged{SubagentRunChanged: *m})
		}
	case *protocol.UsageEvent:
		if m.AgentID == lead {
			w.emit(Usage{AgentID: lead, Usage: m.Usage})
		}
	case *protocol.Status:
		if m.AgentID == lead {
			w.emit(Status{AgentID: lead, Status: m.Status, Detail: m.Detail})
		}
	}
}

// track records r as open (a request already open keeps its state).
func (w *Watcher) track(r Request, perm *protocol.PermissionRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trackLocked(r, perm)
}

// trackLocked is track; mu must be held.
func (w *Watcher) trackLocked(r Request, perm *protocol.PermissionRequest) {
	if o := w.open[r.RequestID]; o != nil {
		o.req, o.perm = r, cmp.Or(perm, o.perm)
		return
	}
	w.open[r.RequestID] = &openRequest{req: r, perm: perm, done: make(chan struct{})}
}

// resolve closes the open request id with the resolution of makes; ok is
// false for a request that is not open (a notify, one resolved already).
func (w *Watcher) resolve(id string, makes func(*openRequest) Resolved) (Resolved, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.open[id]
	if o == nil {
		return Resolved{}, false
	}
	return w.closeLocked(o, makes(o)), true
}

// closeLocked closes o with res (Mine decided here) and remembers res;
// mu must be held.
func (w *Watcher) closeLocked(o *openRequest, res Resolved) Resolved {
	if !res.Missed {
		res.Mine = mine(o.sent, res)
		if res.Mine {
			res.By = o.sent.by
		}
	}
	o.res = res
	close(o.done)
	delete(w.open, o.req.RequestID)
	w.recent = append(w.recent, res)
	if len(w.recent) > recentMax {
		w.recent = slices.Delete(w.recent, 0, len(w.recent)-recentMax)
	}
	return res
}
