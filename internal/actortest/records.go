package actortest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// Record is one record an actor pushed to an outbox, with its envelope.
type Record struct {
	protocol.Header
	Raw []byte
}

// Decode decodes the record into v, failing the test if it cannot.
func (r Record) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Raw, v); err != nil {
		t.Fatalf("decode %s record %s: %v", r.Type, r.Raw, err)
	}
}

// Response decodes the record as a response.
func (r Record) Response(t testing.TB) protocol.Response {
	t.Helper()
	var resp protocol.Response
	r.Decode(t, &resp)
	return resp
}

// Reader reads the records of one outbox in order, as a connection's
// writer would. It is used by one test goroutine.
type Reader struct {
	name    string
	out     *outbox.Outbox
	pending [][]byte
}

// NewReader returns a reader of o; name appears in failure messages.
func NewReader(name string, o *outbox.Outbox) *Reader { return &Reader{name: name, out: o} }

// Next returns the next record, waiting up to Timeout.
func (r *Reader) Next(t testing.TB) Record {
	t.Helper()
	rec, ok := r.next(Timeout)
	if !ok {
		t.Fatalf("%s: no record within %s", r.name, Timeout)
	}
	return r.parse(t, rec)
}

// next returns the next raw record, waiting up to d.
func (r *Reader) next(d time.Duration) ([]byte, bool) {
	if len(r.pending) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		recs, ok := r.out.Next(ctx)
		if !ok {
			return nil, false
		}
		r.pending = append(r.pending, recs...)
	}
	rec := r.pending[0]
	r.pending = r.pending[1:]
	return rec, true
}

func (r *Reader) parse(t testing.TB, rec []byte) Record {
	t.Helper()
	h, err := protocol.DecodeHeader(rec)
	if err != nil {
		t.Fatalf("%s: record %s: %v", r.name, rec, err)
	}
	return Record{Header: h, Raw: rec}
}

// Expect reads records until pred accepts one and returns it together
// with the records read before it. It fails the test after Timeout,
// listing what it read.
func (r *Reader) Expect(t testing.TB, pred func(Record) bool) (Record, []Record) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	var before []Record
	for {
		rec, ok := r.next(time.Until(deadline))
		if !ok {
			t.Fatalf("%s: no matching record within %s; read: %s", r.name, Timeout, types(before))
		}
		got := r.parse(t, rec)
		if pred(got) {
			return got, before
		}
		before = append(before, got)
	}
}

// Take waits for a record pred accepts and returns it, leaving every
// other record queued, in order, for later reads: a response can be taken
// without losing the events that overtook it. It fails the test after
// Timeout.
func (r *Reader) Take(t testing.TB, pred func(Record) bool) Record {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for i := 0; ; {
		for ; i < len(r.pending); i++ {
			if got := r.parse(t, r.pending[i]); pred(got) {
				r.pending = append(r.pending[:i:i], r.pending[i+1:]...)
				return got
			}
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		recs, ok := r.out.Next(ctx)
		cancel()
		if !ok {
			t.Fatalf("%s: no matching record within %s; queued: %s", r.name, Timeout, types(r.Queued(t)))
		}
		r.pending = append(r.pending, recs...)
	}
}

// Queued returns the records that have arrived and not been read, without
// waiting: a check that something has not (yet) happened.
func (r *Reader) Queued(t testing.TB) []Record {
	t.Helper()
	for {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		recs, ok := r.out.Next(ctx)
		if !ok {
			break
		}
		r.pending = append(r.pending, recs...)
	}
	out := make([]Record, 0, len(r.pending))
	for _, rec := range r.pending {
		out = append(out, r.parse(t, rec))
	}
	return out
}

func types(recs []Record) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range recs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.Type)
		if r.ID != "" {
			fmt.Fprintf(&b, "(%s)", r.ID)
		}
	}
	b.WriteByte(']')
	return b.String()
}

// Type accepts records of type typ.
func Type(typ string) func(Record) bool {
	return func(r Record) bool { return r.Type == typ }
}

// ResponseTo accepts the response to the command with id.
func ResponseTo(id string) func(Record) bool {
	return func(r Record) bool { return r.Type == protocol.TypeResponse && r.ID == id }
}

// WatchHub registers a fresh outbox with hub and returns its reader: it
// sees every broadcast from then on. t.Cleanup unregisters it.
func WatchHub(t testing.TB, hub *outbox.Hub) *Reader {
	o := outbox.New(outbox.Limits{})
	hub.Add(o)
	t.Cleanup(func() { hub.Remove(o) })
	return NewReader("hub", o)
}

// Conn is a connection as an agent actor sees it: an agent.Client whose
// PID is a probe (stop the probe and the connection is gone) and whose
// outbox the test reads.
type Conn struct {
	*Reader
	Client *agent.Client
	Probe  *Probe
}

// NewConn returns connection id of transport source ("unix",
// "websocket", …) on sys.
func NewConn(t testing.TB, sys *actor.ActorSystem, id uint64, source string) *Conn {
	t.Helper()
	name := fmt.Sprintf("conn-%d", id)
	p := NewProbe(t, sys, name)
	o := outbox.New(outbox.Limits{})
	return &Conn{
		Reader: NewReader(name, o),
		Client: &agent.Client{ID: id, PID: p.PID, Out: o, Source: source},
		Probe:  p,
	}
}

// Request is the agent.Request the gateway delivers for cmd sent on this
// connection: cmd encoded, then decoded and validated as a client's record
// is.
func (c *Conn) Request(t testing.TB, cmd protocol.Command) *agent.Request {
	t.Helper()
	raw := protocol.MustMarshal(cmd)
	decoded, h, err := protocol.DecodeCommand(raw)
	if err != nil {
		t.Fatalf("command %s: %v", raw, err)
	}
	return &agent.Request{Client: c.Client, Header: h, Cmd: decoded, Raw: raw}
}
