package agent

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// relayActor is an agent with n live attachments whose outboxes the test
// drains (no connection, no direct writer).
func relayActor(n int) (*Actor, []*outbox.Outbox) {
	a := &Actor{m: store.Agent{AgentID: "01J9ZAGENT"}, attached: map[uint64]*attachment{}}
	var outs []*outbox.Outbox
	for i := range n {
		o := outbox.New(outbox.Limits{})
		outs = append(outs, o)
		a.attached[uint64(i)] = &attachment{client: &Client{ID: uint64(i), Out: o}, live: true}
	}
	return a, outs
}

func drainOutbox(t *testing.T, o *outbox.Outbox) [][]byte {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out [][]byte
	for {
		recs, ok := o.Next(ctx)
		if !ok {
			return out
		}
		out = append(out, recs...)
	}
}

// TestBatchFanout: a batch's records reach every attachment spliced
// exactly as WithAgentID would, in order, each its own slice (an append to
// one cannot reach the next), small ones sharing one buffer and a large
// one on its own; held records are written only when the batch ends, and
// a record sent to a client meanwhile goes after those held before it.
func TestBatchFanout(t *testing.T) {
	a, outs := relayActor(3)
	var lines [][]byte
	for i := range 50 {
		l := fmt.Sprintf(`{"type":"message_delta","i":%d,"text_delta":"%s"}`, i, strings.Repeat("t", i*7))
		if i == 20 {
			l = `{"type":"message_complete","text":"` + strings.Repeat("L", spliceMax) + `"}`
		}
		lines = append(lines, []byte(l))
	}
	a.rest = lines
	for i, l := range lines {
		a.rest = lines[i:]
		a.fanout(l)
		if i == 30 { // say, a response to client 0 in the middle of the batch
			a.attached[0].client.Send([]byte(`{"type":"response","id":"x"}`))
		}
	}
	if n := outs[1].Len(); n != len(lines) {
		t.Fatalf("client 1 has %d records queued before the batch ended, want %d (held)", n, len(lines))
	}
	a.endBatch()
	if a.splice != nil || a.rest != nil || len(a.held) != 0 {
		t.Fatal("the batch's buffers outlive it")
	}
	for c, o := range outs {
		got := drainOutbox(t, o)
		var want []string
		for i, l := range lines {
			want = append(want, string(protocol.WithAgentID(l, a.m.AgentID)))
			if c == 0 && i == 30 {
				want = append(want, `{"type":"response","id":"x"}`)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("client %d: %d records, want %d", c, len(got), len(want))
		}
		for i := range want {
			if string(got[i]) != want[i] {
				t.Fatalf("client %d record %d = %.60q, want %.60q", c, i, got[i], want[i])
			}
			if cap(got[i]) != len(got[i]) {
				t.Fatalf("client %d record %d: cap %d > len %d", c, i, cap(got[i]), len(got[i]))
			}
		}
	}
	// The clients share each record (one splice per record, not per
	// client).
	a.rest = lines[:1]
	a.fanout(lines[0])
	a.endBatch()
	r0, r1 := drainOutbox(t, outs[0]), drainOutbox(t, outs[1])
	drainOutbox(t, outs[2])
	if len(r0) != 1 || len(r1) != 1 || &r0[0][0] != &r1[0][0] {
		t.Fatal("the clients got different copies of one record")
	}
	// Outside a batch a record is sent at once.
	a.fanout([]byte(`{"type":"status","status":"idle"}`))
	if outs[2].Len() != 1 {
		t.Fatal("a record outside a batch was held")
	}
	if got := drainOutbox(t, outs[2]); !bytes.Equal(got[0], protocol.WithAgentID([]byte(`{"type":"status","status":"idle"}`), a.m.AgentID)) {
		t.Fatalf("got %q", got)
	}
}

// TestBatchDirectUpToDirectFanout: a batch for up to directFanout clients
// is written by the agent itself through each idle connection's direct
// writer, in one call per client; one client more and every connection's
// writer goroutine gets it instead (the direct writer is never called).
func TestBatchDirectUpToDirectFanout(t *testing.T) {
	for _, n := range []int{1, directFanout, directFanout + 1} {
		a, outs := relayActor(n)
		calls := make([]int, n)
		got := make([][]byte, n)
		for i, o := range outs {
			o.SetDirect(func(recs [][]byte) int {
				calls[i]++
				size := 0
				for _, r := range recs {
					got[i] = append(append(got[i], r...), '\n')
					size += len(r) + 1
				}
				return size
			})
		}
		lines := [][]byte{[]byte(`{"type":"message_delta","text_delta":"a"}`), []byte(`{"type":"message_delta","text_delta":"b"}`)}
		for i, l := range lines {
			a.rest = lines[i:]
			a.fanout(l)
		}
		a.endBatch()
		want := string(protocol.WithAgentID(lines[0], a.m.AgentID)) + "\n" + string(protocol.WithAgentID(lines[1], a.m.AgentID)) + "\n"
		for i, o := range outs {
			if n <= directFanout {
				if calls[i] != 1 || string(got[i]) != want || o.Len() != 0 {
					t.Fatalf("%d clients: client %d: %d direct writes of %q, %d left queued; want 1 of %q, none", n, i, calls[i], got[i], o.Len(), want)
				}
				continue
			}
			if calls[i] != 0 || o.Len() != 2 {
				t.Fatalf("%d clients: client %d: %d direct writes, %d queued for its writer; want 0 and 2", n, i, calls[i], o.Len())
			}
		}
	}
}

// A client's Send writes the record itself when the connection is idle
// (no wake-up of its writer), and queues it for the writer when the
// socket does not take it all.
func TestClientSendWritesDirectlyWhenIdle(t *testing.T) {
	out := outbox.New(outbox.Limits{})
	var wrote []byte
	take := true
	out.SetDirect(func(recs [][]byte) int {
		if !take {
			return 0
		}
		n := 0
		for _, r := range recs {
			wrote = append(append(wrote, r...), '\n')
			n += len(r) + 1
		}
		return n
	})
	c := &Client{ID: 1, Out: out}
	c.Send([]byte(`{"type":"response","id":"1"}`))
	if string(wrote) != "{\"type\":\"response\",\"id\":\"1\"}\n" || out.Len() != 0 {
		t.Fatalf("wrote %q with %d left queued; want the response written, nothing queued", wrote, out.Len())
	}
	take = false
	c.Send([]byte(`{"type":"response","id":"2"}`))
	if out.Len() != 1 {
		t.Fatalf("%d queued after a refused direct write, want 1 for the writer", out.Len())
	}
}
