// Package recordstest opens the cluster's records over a NATS connection
// of a test's own, so a test outside cluster/ (which may not import NATS)
// can play a node: claim a run and write its records as the node that
// runs it would, and read what a shardd wrote.
package recordstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shard-dev/shard/cluster/records"
)

// Dial connects to the NATS client URL of a cluster node with the
// cluster's token and opens (binds) the records with replicas replicas,
// as the nodes made them. The connection closes when t ends.
func Dial(t testing.TB, url, token string, replicas int) *records.Records {
	t.Helper()
	nc, err := nats.Connect(url, nats.Token(token), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("recordstest: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("recordstest: jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec, err := records.Open(ctx, js, records.Options{Replicas: replicas})
	if err != nil {
		t.Fatalf("recordstest: open the records: %v", err)
	}
	return rec
}
