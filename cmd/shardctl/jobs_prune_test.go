package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// jobs prune sends jobs.prune with the age in ms and the dry-run flag, and
// prints what the daemon answered; --older-than is required.
func TestJobsPruneSendsAndPrints(t *testing.T) {
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, rec []byte) {
		if h.Type != protocol.TypeJobsPrune {
			return
		}
		var m protocol.JobsPrune
		_ = json.Unmarshal(rec, &m)
		c.respond(h, protocol.JobsPruneData{JobIDs: []string{"job-1"}, AgentIDs: []string{"agent-1"}, DryRun: m.DryRun})
	})
	if r := runCtl(t, nil, d.path, "", "jobs", "prune"); r.code != exitUsage {
		t.Fatalf("prune without --older-than: exit %d", r.code)
	}
	r := runCtl(t, nil, d.path, "", "jobs", "prune", "--older-than", "2h", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stderr, "Would remove 1 job(s) and 1 subagent(s).") || !strings.Contains(r.stdout, "job-1") || !strings.Contains(r.stdout, "agent-1") {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "jobs", "prune", "--older-than", "0s", "-o", "json")
	var data protocol.JobsPruneData
	if err := json.Unmarshal([]byte(r.stdout), &data); err != nil || r.code != 0 || data.DryRun || len(data.JobIDs) != 1 {
		t.Fatalf("prune -o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	recs := d.records(protocol.TypeJobsPrune)
	if len(recs) != 2 {
		t.Fatalf("%d jobs.prune sent, want 2", len(recs))
	}
	var first, second protocol.JobsPrune
	_ = json.Unmarshal(recs[0], &first)
	_ = json.Unmarshal(recs[1], &second)
	if first.OlderThanMs != 7_200_000 || !first.DryRun || second.OlderThanMs != 0 || second.DryRun {
		t.Fatalf("sent %+v then %+v", first, second)
	}
}
