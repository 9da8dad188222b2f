package recordstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shard-dev/shard/cluster/records"
)

// Dial connects to url (a node's nats:// client URL) with token and opens
// the records with opts; both are closed when the test ends.
func Dial(t testing.TB, url, token string, opts records.Options) *records.Records {
	t.Helper()
	nc, err := nats.Connect(url, nats.Token(token), nats.Name("shard test"),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("recordstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("recordstest: jetstream: %v", err)
	}
	rec, err := records.Open(t.Context(), js, opts)
	if err != nil {
		t.Fatalf("recordstest: open records: %v", err)
	}
	return rec
}
