package agentdir

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
)

// Source reads this node's own agents, as its registry knows them.
type Source interface {
	// All returns every agent this node hosts.
	All(ctx context.Context) ([]protocol.AgentInfo, error)
	// One returns one agent; found is false once the node no longer has it.
	One(ctx context.Context, agentID string) (info protocol.AgentInfo, found bool, err error)
}

// Table is the directory bucket as the Publisher uses it
// (*records.Table[records.AgentEntry]).
type Table interface {
	Get(ctx context.Context, key string) (records.Entry[records.AgentEntry], error)
	Create(ctx context.Context, key string, v records.AgentEntry) (uint64, error)
	Update(ctx context.Context, key string, v records.AgentEntry, rev uint64) (uint64, error)
	Delete(ctx context.Context, key string, rev uint64) error
	List(ctx context.Context, prefix string) ([]records.Entry[records.AgentEntry], error)
}

// Defaults of PublisherOptions.
const (
	DefaultRetry    = 2 * time.Second
	DefaultMaxRetry = 30 * time.Second
	// maxAttempts bounds the compare-and-set loop of one entry: each
	// conflict means another writer moved the key, and the loop reads it
	// again; a key that keeps moving is left for the next pass.
	maxAttempts = 8
)

// PublisherOptions configures a Publisher.
type PublisherOptions struct {
	// Node is this node's name: the entries it writes, and the only ones it
	// deletes.
	Node string
	// Table is the directory bucket; Source this node's agents.
	Table  Table
	Source Source
	Logger *slog.Logger
	// Retry is the first wait after a pass failed (the cluster had no
	// quorum, the registry did not answer), doubled up to MaxRetry.
	Retry, MaxRetry time.Duration
	// Written, when set, is told each entry written (deleted: nil entry).
	// Tests count writes with it.
	Written func(agentID string, e *records.AgentEntry)
	// beforeWrite, when set, runs before each compare-and-set (tests
	// make a conflict with it).
	beforeWrite func(agentID string)
}

// Publisher writes this node's agents into the directory: on start a full
// reconciliation (its entries made to match its registry: missing ones
// created, changed ones updated, those of agents it no longer has
// deleted), then each agent marked Changed. Marks coalesce: an agent
// changed a hundred times while a pass runs is read and written once
// after it. Every write is a compare-and-set on the entry's revision; a
// conflict reads the entry again and retries. A failed pass (no quorum) is
// logged and tried again later; nothing waits on it.
type Publisher struct {
	o    PublisherOptions
	wake chan struct{}

	// mu protects the marks.
	mu    sync.Mutex
	full  bool
	dirty map[string]struct{}
}

// NewPublisher returns a Publisher that has a full reconciliation pending;
// Run carries it out.
func NewPublisher(o PublisherOptions) *Publisher {
	o.Retry = cmp.Or(o.Retry, DefaultRetry)
	o.MaxRetry = cmp.Or(o.MaxRetry, DefaultMaxRetry)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{o: o, wake: make(chan struct{}, 1), full: true, dirty: map[string]struct{}{}}
	p.signal()
	return p
}

// Changed marks agentID for publishing (created, updated or removed). It
// never blocks.
func (p *Publisher) Changed(agentID string) {
	p.mu.Lock()
	p.dirty[agentID] = struct{}{}
	p.mu.Unlock()
	p.signal()
}

// Resync marks every agent for publishing: a full reconciliation (after
// the node missed changes). It never blocks.
func (p *Publisher) Resync() {
	p.mu.Lock()
	p.full = true
	p.mu.Unlock()
	p.signal()
}

func (p *Publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take returns and clears the marks.
func (p *Publisher) take() (full bool, ids []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	full, p.full = p.full, false
	for id := range p.dirty {
		ids = append(ids, id)
	}
	clear(p.dirty)
	return full, ids
}

// Run publishes until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	wait := p.o.Retry
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		full, ids := p.take()
		if !full && len(ids) == 0 {
			continue
		}
		err := p.pass(ctx, full, ids)
		if err == nil {
			wait = p.o.Retry
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.o.Logger.Warn("cluster: agent directory not published; retrying", "node", p.o.Node, "retry_in", wait.String(), "err", err)
		// What failed is marked again and retried after the wait.
		p.mu.Lock()
		p.full = p.full || full
		for _, id := range ids {
			p.dirty[id] = struct{}{}
		}
		p.mu.Unlock()
		if !clock.Sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, p.o.MaxRetry)
		p.signal()
	}
}

// pass publishes once: everything (full) or the agents ids.
func (p *Publisher) pass(ctx context.Context, full bool, ids []string) error {
	if full {
		return p.reconcile(ctx)
	}
	var errs []error
	for _, id := range ids {
		if err := p.one(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reconcile makes this node's entries match its registry.
func (p *Publisher) reconcile(ctx context.Context) error {
	infos, err := p.o.Source.All(ctx)
	if err != nil {
		return fmt.Errorf("agentdir: read this node's agents: %w", err)
	}
	all, err := p.o.Table.List(ctx, "")
	if err != nil {
		return fmt.Errorf("agentdir: read the directory: %w", err)
	}
	cur := make(map[string]records.Entry[records.AgentEntry], len(all))
	for _, e := range all {
		cur[e.Key] = e
	}
	var errs []error
	have := make(map[string]bool, len(infos))
	for _, in := range infos {
		have[in.AgentID] = true
		e, ok := cur[in.AgentID]
		var at *records.Entry[records.AgentEntry]
		if ok {
			at = &e
		}
		if err := p.put(ctx, EntryOf(p.o.Node, in), at); err != nil {
			errs = append(errs, err)
		}
	}
	for id, e := range cur {
		if e.Value.Node == p.o.Node && !have[id] {
			if err := p.remove(ctx, id, &e); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// one publishes agent id as the registry has it now.
func (p *Publisher) one(ctx context.Context, id string) error {
	in, found, err := p.o.Source.One(ctx, id)
	if err != nil {
		return fmt.Errorf("agentdir: read agent %s: %w", id, err)
	}
	if !found {
		return p.remove(ctx, id, nil)
	}
	return p.put(ctx, EntryOf(p.o.Node, in), nil)
}

// get reads the entry of id; nil when there is none.
func (p *Publisher) get(ctx context.Context, id string) (*records.Entry[records.AgentEntry], error) {
	e, err := p.o.Table.Get(ctx, id)
	if errors.Is(err, records.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// put writes want unless the entry (cur, read when nil is passed and not
// known to be absent) already holds it.
func (p *Publisher) put(ctx context.Context, want records.AgentEntry, cur *records.Entry[records.AgentEntry]) error {
	id := want.AgentID
	known := cur != nil
	for range maxAttempts {
		if !known {
			var err error
			if cur, err = p.get(ctx, id); err != nil {
				return fmt.Errorf("agentdir: read %s: %w", id, err)
			}
		}
		known = false // a retry reads again
		if cur != nil && cur.Value == want {
			return nil
		}
		if p.o.beforeWrite != nil {
			p.o.beforeWrite(id)
		}
		var err error
		if cur == nil {
			_, err = p.o.Table.Create(ctx, id, want)
		} else {
			// The host writes its own agents; an entry of another node
			// under this id (ids are unique, so never in practice) is
			// taken over by the node that has the agent.
			_, err = p.o.Table.Update(ctx, id, want, cur.Revision)
		}
		switch {
		case err == nil:
			if p.o.Written != nil {
				p.o.Written(id, &want)
			}
			return nil
		case errors.Is(err, records.ErrExists), errors.Is(err, records.ErrConflict):
			continue // someone wrote it meanwhile: read again, decide again
		default:
			return fmt.Errorf("agentdir: write %s: %w", id, err)
		}
	}
	return fmt.Errorf("agentdir: write %s: %w", id, records.ErrConflict)
}

// remove deletes the entry of id if this node wrote it.
func (p *Publisher) remove(ctx context.Context, id string, cur *records.Entry[records.AgentEntry]) error {
	known := cur != nil
	for range maxAttempts {
		if !known {
			var err error
			if cur, err = p.get(ctx, id); err != nil {
				return fmt.Errorf("agentdir: read %s: %w", id, err)
			}
		}
		known = false
		if cur == nil || cur.Value.Node != p.o.Node {
			return nil
		}
		if p.o.beforeWrite != nil {
			p.o.beforeWrite(id)
		}
		err := p.o.Table.Delete(ctx, id, cur.Revision)
		switch {
		case err == nil:
			if p.o.Written != nil {
				p.o.Written(id, nil)
			}
			return nil
		case errors.Is(err, records.ErrConflict):
			continue
		default:
			return fmt.Errorf("agentdir: delete %s: %w", id, err)
		}
	}
	return fmt.Errorf("agentdir: delete %s: %w", id, records.ErrConflict)
}
