package gateway

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// liveHeap is the heap still referenced: collected first, so garbage not
// yet swept does not count.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestOneClientCannotTakeTheMemory: one unix client writing records just
// under the record limit, each with an id far over its limit, as fast as
// the socket takes them. Every record is answered INVALID_REQUEST without
// the id (never echoed), and what the daemon holds for the connection
// stays under one record limit at every admission: a refused record is not
// kept while its answer waits, the next record is not read while one that
// fills the bound is in flight, and no answer carries the client's
// megabytes back into the outbox.
func TestOneClientCannotTakeTheMemory(t *testing.T) {
	// Not parallel: it measures the process's heap.
	const n = 4
	size := protocol.DefaultMaxRecord - 2<<20 // 30 MiB
	var (
		mu        sync.Mutex
		base      uint64
		measuring bool
		peak      uint64
		maxRecs   int
	)
	tg := startGateway(t, Config{hooks: &testHooks{inflight: func(_ uint64, records, _ int) {
		mu.Lock()
		defer mu.Unlock()
		if !measuring {
			return
		}
		maxRecs = max(maxRecs, records)
		if h := liveHeap(); h > peak {
			peak = h
		}
	}}})
	c := tg.dialRaw(t)
	if r := c.mustRead(t); r.Type != protocol.TypeHello {
		t.Fatalf("first record %+v", r)
	}
	prefix := `{"type":"agent.list","id":"`
	rec := make([]byte, 0, size+1)
	rec = append(rec, prefix...)
	rec = append(rec, bytes.Repeat([]byte("x"), size-len(prefix)-2)...)
	rec = append(rec, `"}`...)
	rec = append(rec, '\n')
	mu.Lock()
	base, measuring = liveHeap(), true
	mu.Unlock()

	written := make(chan error, 1)
	go func() {
		for range n {
			if _, err := c.Write(rec); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	for range n {
		line, err := c.rd.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if len(line) > 1024 || bytes.Contains(line, []byte("xxxxxxxx")) {
			t.Fatalf("an answer of %d bytes echoes the id: %.200s", len(line), line)
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if r.Type != protocol.TypeResponse || r.ID != "" || r.Error == nil || r.Error.Code != protocol.CodeInvalidRequest ||
			!strings.Contains(r.Error.Message, `field "id"`) || !strings.Contains(r.Error.Message, "limit 256 bytes") {
			t.Fatalf("answer %s", line)
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	measuring = false
	held := int64(peak) - int64(base)
	t.Logf("held at most %d MiB over the baseline; %d records in flight at most", held>>20, maxRecs)
	if maxRecs != 1 {
		t.Errorf("%d records of %d MiB in flight at once, want 1", maxRecs, size>>20)
	}
	if held > int64(protocol.DefaultMaxRecord) {
		t.Errorf("the daemon held %d MiB for one client, more than one record limit (%d MiB)", held>>20, protocol.DefaultMaxRecord>>20)
	}
}
