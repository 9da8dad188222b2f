package main

import (
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func TestShutdown(t *testing.T) {
	for _, force := range []bool{false, true} {
		d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
			c.respond(h, nil)
			c.close()
		})
		args := []string{"shutdown"}
		if force {
			args = append(args, "--force")
		}
		r := runCtl(t, nil, d.path, "", args...)
		if r.code != 0 || r.stdout != "shardd is shutting down\n" {
			t.Fatalf("force=%v: exit %d stdout %q stderr %q", force, r.code, r.stdout, r.stderr)
		}
		recs := d.records(protocol.TypeDaemonShutdown)
		if len(recs) != 1 {
			t.Fatalf("shutdown records = %d", len(recs))
		}
		var m protocol.DaemonShutdown
		mustUnmarshal(t, recs[0], &m)
		if m.Force != force {
			t.Fatalf("force = %v, sent %s", force, recs[0])
		}
	}
}
