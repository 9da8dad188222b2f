package records

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/protocol"
)

// Entry is a record as read, with the revision a compare-and-set names.
// A revision is the sequence of the write in the bucket's stream: it only
// grows, and every write of the key (a delete too) changes it.
type Entry[T Record] struct {
	Key      string
	Value    T
	Revision uint64
}

// Change is one change a Watch delivers. Exactly one of these holds: a
// put (Value set, Deleted false), a delete (Deleted), an undecodable value
// (Err wraps ErrDecode; the watch goes on), or the marker Synced, sent
// once when every record that existed at the start was delivered, after
// which each change is live.
type Change[T Record] struct {
	Key      string
	Revision uint64
	Value    T
	Deleted  bool
	Err      error
	Synced   bool
}

// Table is one bucket of one record kind. Its methods are safe for
// concurrent use by many goroutines; every write is a compare-and-set on
// the key's revision, decided by the bucket's stream leader, so writers on
// different nodes serialize there and exactly one wins each revision.
type Table[T Record] struct {
	bucket string
	kv     jetstream.KeyValue
	js     jetstream.JetStream
	stream jetstream.Stream
	subj   string // "$KV.<bucket>.": the key's subject is subj+key
	opts   *Options
}

// kvOperation is the header the KV convention marks deletes with; a
// delete is a message (a marker) so that it has a revision too.
const (
	kvOperation = "KV-Operation"
	kvDelete    = "DEL"
	kvPurge     = "PURGE"
)

// Bucket returns the bucket's name.
func (t *Table[T]) Bucket() string { return t.bucket }

// Create stores v at key only if the key holds no record (never written,
// or deleted). It returns the new revision. A key that holds a record is
// ErrExists (code CONFLICT), whoever wrote it.
func (t *Table[T]) Create(ctx context.Context, key string, v T) (uint64, error) {
	if !validKey(key) {
		return 0, fail(ErrInvalid, nil, "create %s %q: bad key", t.bucket, key)
	}
	raw, err := encode(&v)
	if err != nil {
		return 0, protocol.Errorf(protocol.CodeInvalidRequest, "create %s %q: %w", t.bucket, key, err)
	}
	ctx, cancel := t.opCtx(ctx)
	defer cancel()
	rev, err := t.write(ctx, key, raw, 0, false)
	if !errors.Is(err, ErrConflict) {
		return rev, t.wrap(err, "create", key)
	}
	// The key has history. It is free again only if its last write is a
	// delete marker: then the create is a compare-and-set on the marker.
	last, deleted, gerr := t.last(ctx, key)
	if gerr != nil {
		return 0, t.wrap(gerr, "create", key)
	}
	if !deleted {
		return 0, fail(ErrExists, nil, "create %s %q: revision %d holds it", t.bucket, key, last)
	}
	rev, err = t.write(ctx, key, raw, last, false)
	if errors.Is(err, ErrConflict) {
		return 0, fail(ErrExists, nil, "create %s %q: written meanwhile", t.bucket, key)
	}
	return rev, t.wrap(err, "create", key)
}

// Update stores v at key only if the key's current revision is rev (a
// record read with Get or List). Otherwise someone else wrote it since
// and nothing is written: ErrConflict (code CONFLICT). A deleted key is
// also ErrConflict: its revision moved on.
func (t *Table[T]) Update(ctx context.Context, key string, v T, rev uint64) (uint64, error) {
	if !validKey(key) || rev == 0 {
		return 0, fail(ErrInvalid, nil, "update %s %q: bad key or revision 0 (use Create)", t.bucket, key)
	}
	raw, err := encode(&v)
	if err != nil {
		return 0, protocol.Errorf(protocol.CodeInvalidRequest, "update %s %q: %w", t.bucket, key, err)
	}
	ctx, cancel := t.opCtx(ctx)
	defer cancel()
	nrev, err := t.write(ctx, key, raw, rev, false)
	return nrev, t.wrap(err, "update", key)
}

// Delete removes the record at key only if its current revision is rev,
// as Update decides (ErrConflict otherwise). The delete is a marker with
// a revision of its own, so a watcher on another node sees it.
func (t *Table[T]) Delete(ctx context.Context, key string, rev uint64) error {
	if !validKey(key) || rev == 0 {
		return fail(ErrInvalid, nil, "delete %s %q: bad key or revision 0", t.bucket, key)
	}
	ctx, cancel := t.opCtx(ctx)
	defer cancel()
	_, err := t.write(ctx, key, nil, rev, true)
	return t.wrap(err, "delete", key)
}

// Get returns the record at key and its revision: ErrNotFound when the
// key holds none. The read is answered by the stream's leader, so it sees
// every write acknowledged before it — except for the moment after a
// partition heals, when a server that was cut off may still take itself
// for the leader and answer from its old state (docs/cluster.md). A
// decision made on such a read is still safe: the compare-and-set that
// carries it out fails with ErrConflict, and the caller reads again.
func (t *Table[T]) Get(ctx context.Context, key string) (Entry[T], error) {
	if !validKey(key) {
		return Entry[T]{}, fail(ErrInvalid, nil, "get %s %q: bad key", t.bucket, key)
	}
	ctx, cancel := t.opCtx(ctx)
	defer cancel()
	for {
		msg, err := t.lastMsg(ctx, key)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return Entry[T]{}, fail(ErrNotFound, nil, "get %s %q", t.bucket, key)
		}
		if err != nil {
			if retryable(err) && t.pause(ctx) {
				continue
			}
			return Entry[T]{}, t.wrap(unavailable(ctx, err), "get", key)
		}
		if isDeleteMarker(msg.Header) {
			return Entry[T]{}, fail(ErrNotFound, nil, "get %s %q: deleted", t.bucket, key)
		}
		v, err := decode[T](msg.Data)
		if err != nil {
			return Entry[T]{}, fail(ErrDecode, err, "get %s %q revision %d", t.bucket, key, msg.Sequence)
		}
		return Entry[T]{Key: key, Value: v, Revision: msg.Sequence}, nil
	}
}

// List returns every record under prefix (whole dot-separated tokens: the
// runs of a job are List(ctx, jobID); "" is every record), in the order
// of their last writes. A record that does not decode fails the list with
// ErrDecode: a caller acting on a list must not miss one silently.
func (t *Table[T]) List(ctx context.Context, prefix string) ([]Entry[T], error) {
	filter, err := t.filter(prefix)
	if err != nil {
		return nil, err
	}
	ctx, cancel := t.opCtx(ctx)
	defer cancel()
	w, err := t.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, t.wrap(unavailable(ctx, err), "list", prefix)
	}
	defer w.Stop()
	out := []Entry[T]{}
	for {
		select {
		case <-ctx.Done():
			return nil, t.wrap(unavailable(ctx, ctx.Err()), "list", prefix)
		case e, ok := <-w.Updates():
			if !ok {
				return nil, t.wrap(unavailable(ctx, ctx.Err()), "list", prefix)
			}
			if e == nil {
				return out, nil
			}
			v, err := decode[T](e.Value())
			if err != nil {
				return nil, fail(ErrDecode, err, "list %s: %q revision %d", t.bucket, e.Key(), e.Revision())
			}
			out = append(out, Entry[T]{Key: e.Key(), Value: v, Revision: e.Revision()})
		}
	}
}

// Keys returns the keys of the records under prefix (as List, without
// reading the values).
func (t *Table[T]) Keys(ctx context.Context, prefix string) ([]string, error) {
	filter, err := t.filter(prefix)
	if err != nil {
		return nil, err
	}
	ctx, cancel := t.opCtx(ctx)
	defer cancel()
	w, err := t.kv.Watch(ctx, filter, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return nil, t.wrap(unavailable(ctx, err), "keys", prefix)
	}
	defer w.Stop()
	out := []string{}
	for {
		select {
		case <-ctx.Done():
			return nil, t.wrap(unavailable(ctx, ctx.Err()), "keys", prefix)
		case e, ok := <-w.Updates():
			if !ok {
				return nil, t.wrap(unavailable(ctx, ctx.Err()), "keys", prefix)
			}
			if e == nil {
				return out, nil
			}
			out = append(out, e.Key())
		}
	}
}

// Watch delivers the records under prefix, then the marker Synced, then
// every later change, on the returned channel, so another node's view
// stays live. It stops when ctx ends: its goroutine stops the server-side
// watcher and closes the channel, and never blocks past ctx on a reader
// that stopped reading. The channel also closes if the connection closes
// for good; a reader tells the two apart by its ctx. A reader must keep
// up: the channel holds Options.WatchBuffer changes, and the watch waits
// for room rather than drop one.
func (t *Table[T]) Watch(ctx context.Context, prefix string) (<-chan Change[T], error) {
	filter, err := t.filter(prefix)
	if err != nil {
		return nil, err
	}
	w, err := t.kv.Watch(ctx, filter)
	if err != nil {
		return nil, t.wrap(unavailable(ctx, err), "watch", prefix)
	}
	out := make(chan Change[T], t.opts.WatchBuffer)
	go func() {
		defer close(out)
		defer w.Stop()
		for {
			var e jetstream.KeyValueEntry
			select {
			case <-ctx.Done():
				return
			case u, ok := <-w.Updates():
				if !ok {
					return
				}
				e = u
			}
			c := Change[T]{Synced: e == nil}
			if e != nil {
				c.Key, c.Revision = e.Key(), e.Revision()
				if e.Operation() != jetstream.KeyValuePut {
					c.Deleted = true
				} else if v, derr := decode[T](e.Value()); derr != nil {
					c.Err = fail(ErrDecode, derr, "watch %s: %q revision %d", t.bucket, e.Key(), e.Revision())
				} else {
					c.Value = v
				}
			}
			select {
			case <-ctx.Done():
				return
			case out <- c:
			}
		}
	}()
	return out, nil
}

// write publishes one value (or a delete marker) at key, expecting the
// key's last revision to be expect (0: no message on the key at all).
//
// A write whose acknowledgement was lost is retried with the same message
// id until ctx ends: the stream drops a repeated id within its duplicate
// window (two minutes) and answers with the first write's revision, and
// it checks the id before the expected revision, so a retry of a write
// that did commit is acknowledged as that write, never misread as a
// conflict, and never stored twice. A wrong last revision is ErrConflict,
// at once; no acknowledgement before ctx ends is ErrUnavailable.
func (t *Table[T]) write(ctx context.Context, key string, data []byte, expect uint64, del bool) (uint64, error) {
	id := nuid.Next()
	for {
		msg := nats.NewMsg(t.subj + key)
		msg.Data = data
		if del {
			msg.Header.Set(kvOperation, kvDelete)
		}
		actx, cancel := context.WithTimeout(ctx, t.opts.AttemptTimeout)
		ack, err := t.js.PublishMsg(actx, msg,
			jetstream.WithMsgID(id),
			jetstream.WithExpectLastSequencePerSubject(expect),
			jetstream.WithRetryAttempts(0))
		cancel()
		if err == nil {
			return ack.Sequence, nil
		}
		if isWrongLastSeq(err) {
			return 0, fail(ErrConflict, nil, "revision %d is not the last", expect)
		}
		if !retryable(err) {
			return 0, err
		}
		if !t.pause(ctx) {
			return 0, unavailable(ctx, err)
		}
	}
}

// last returns the revision of the key's last message and whether it is a
// delete marker (the key has history, so a message exists).
func (t *Table[T]) last(ctx context.Context, key string) (uint64, bool, error) {
	for {
		msg, err := t.lastMsg(ctx, key)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// Purged meanwhile: treat as a conflict the caller reports.
			return 0, false, fail(ErrConflict, nil, "no last revision")
		}
		if err != nil {
			if retryable(err) && t.pause(ctx) {
				continue
			}
			return 0, false, unavailable(ctx, err)
		}
		return msg.Sequence, isDeleteMarker(msg.Header), nil
	}
}

// lastMsg makes one attempt to read the key's last message from the
// stream leader, bounded by Options.AttemptTimeout: while a stream elects
// a new leader nobody answers, and the request is sent again, to whoever
// leads by then, rather than waited on for the whole operation.
func (t *Table[T]) lastMsg(ctx context.Context, key string) (*jetstream.RawStreamMsg, error) {
	actx, cancel := context.WithTimeout(ctx, t.opts.AttemptTimeout)
	defer cancel()
	return t.stream.GetLastMsgForSubject(actx, t.subj+key)
}

// pause waits a little before another attempt (a leader election takes
// a few hundred milliseconds). It reports false when ctx ended first.
func (t *Table[T]) pause(ctx context.Context) bool { return clock.Sleep(ctx, t.opts.RetryWait) }

// opCtx bounds one operation by Options.Timeout, so a node cut off from
// the majority answers ErrUnavailable instead of waiting forever.
func (t *Table[T]) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.opts.Timeout)
}

// filter is the subject filter of a key prefix.
func (t *Table[T]) filter(prefix string) (string, error) {
	if prefix == "" {
		return ">", nil
	}
	if !validKey(prefix) {
		return "", fail(ErrInvalid, nil, "%s: bad prefix %q", t.bucket, prefix)
	}
	return prefix + ".>", nil
}

// wrap names the operation on an error of write or last; errors of this
// package pass with that context, anything else is an internal error.
func (t *Table[T]) wrap(err error, op, key string) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{ErrConflict, ErrExists, ErrNotFound, ErrUnavailable, ErrDecode, ErrInvalid} {
		if errors.Is(err, s) {
			return fmt.Errorf("%s %s %q: %w", op, t.bucket, key, err)
		}
	}
	return protocol.Errorf(protocol.CodeInternal, "%s %s %q: %w", op, t.bucket, key, err)
}

// unavailable turns the last error of an operation that ran out of time
// (or met a closed connection) into ErrUnavailable.
func unavailable(ctx context.Context, err error) error {
	if cerr := context.Cause(ctx); cerr != nil && !errors.Is(err, cerr) {
		return fail(ErrUnavailable, err, "no answer from a stream leader (%v)", cerr)
	}
	return fail(ErrUnavailable, err, "no answer from a stream leader")
}

// isWrongLastSeq reports the stream's answer to a compare-and-set whose
// expected revision is not the key's last (10071, or 10164 from a
// replicated stream).
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// retryable reports whether another attempt may succeed: no answer in
// time, no responder (a stream between leaders), the JetStream system
// unavailable, or any other server-side (5xx) or conflict (409, a
// duplicate still in flight) answer. A request the server refuses as bad
// (4xx) fails at once.
func retryable(err error) bool {
	if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code >= 500 || apiErr.Code == 409 || apiErr.Code == 0
	}
	return true
}

// isDeleteMarker reports a KV delete or purge marker.
func isDeleteMarker(h nats.Header) bool {
	op := h.Get(kvOperation)
	return op == kvDelete || op == kvPurge || h.Get(jetstream.MarkerReasonHeader) != ""
}
