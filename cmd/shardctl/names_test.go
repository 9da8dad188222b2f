package main

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

func TestMatchAgent(t *testing.T) {
	agents := []protocol.AgentInfo{
		{AgentID: "agent-01j9z7k3m2x4q8r6t0v5w1y3b7", Name: "boss"},
		{AgentID: "agent-01j9z7k3m2x4q8r6t0v5w1y3c8", Alias: "Scout", ParentAgentID: "agent-01j9z7k3m2x4q8r6t0v5w1y3b7"},
		{AgentID: "agent-01j9z7k3m2zzzzzzzzzzzzzzzz", Name: "twin"},
		{AgentID: "agent-01j9z7k3m2yyyyyyyyyyyyyyyy", Name: "twin"},
	}
	for handle, want := range map[string]string{
		"boss":                            "agent-01j9z7k3m2x4q8r6t0v5w1y3b7",
		"scout":                           "agent-01j9z7k3m2x4q8r6t0v5w1y3c8",
		"agent-01j9z7k3m2x4q8r6t0v5w1y3c": "agent-01j9z7k3m2x4q8r6t0v5w1y3c8",
		"01j9z7k3m2zz":                    "agent-01j9z7k3m2zzzzzzzzzzzzzzzz",
		"nobody":                          "nobody", // the daemon says NOT_FOUND
	} {
		if got, err := matchAgent(agents, handle); err != nil || got != want {
			t.Errorf("matchAgent(%q) = %q, %v; want %q", handle, got, err, want)
		}
	}
	for _, handle := range []string{"twin", "agent-01j9z7k3m2x4"} {
		_, err := matchAgent(agents, handle)
		if err == nil || !strings.Contains(err.Error(), "use an id") {
			t.Errorf("matchAgent(%q) err = %v, want ambiguous with candidates", handle, err)
		}
	}
	short := shortIDs([]string{agents[0].AgentID, agents[1].AgentID, agents[2].AgentID})
	if short[agents[0].AgentID] != "agent-01j9z7k3m2x4q8r6t0v5w1y3b" || short[agents[2].AgentID] != "agent-01j9z7k3m2zz" {
		t.Errorf("shortIDs = %v", short)
	}
}

// TestJobsLsParentByNameAndUnknown: --parent takes a name; an unknown
// parent is NOT_FOUND (exit 1), not "No jobs." with exit 0; an ambiguous
// name lists its candidates.
func TestJobsLsParentByNameAndUnknown(t *testing.T) {
	d := jobsDaemon(t, noWait)
	if r := runCtl(t, nil, d.path, "", "jobs", "ls", "--parent", "boss", "-o", "json"); r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	var m protocol.JobsList
	mustUnmarshal(t, d.records(protocol.TypeJobsList)[0], &m)
	if m.ParentAgentID != "agent-p1" {
		t.Errorf("--parent boss sent %q", m.ParentAgentID)
	}
	r := runCtl(t, nil, d.path, "", "jobs", "ls", "--parent", "nobody")
	if r.code != exitFailed || !strings.Contains(r.stderr, `NOT_FOUND: no agent "nobody"`) {
		t.Errorf("unknown parent: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, nil, d.path, "", "jobs", "ls", "--parent", "twin")
	if r.code != exitFailed || !strings.Contains(r.stderr, "agent-p2 (twin), agent-p3 (twin)") {
		t.Errorf("ambiguous parent: exit %d stderr %q", r.code, r.stderr)
	}
}

// TestVersionPrintsClientAndDaemon: version names both sides; a daemon
// that is down is reported, and the command still succeeds.
func TestVersionPrintsClientAndDaemon(t *testing.T) {
	d := newFakeDaemon(t, nil)
	r := runCtl(t, nil, d.path, "", "version")
	if r.code != 0 || !strings.Contains(r.stdout, "Client:  "+clientVersion+" (protocol "+protocol.Version) ||
		!strings.Contains(r.stdout, "Daemon:  fake (protocol "+protocol.Version+")") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCtl(t, nil, d.path+".gone", "", "version", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"daemon_error"`) || strings.Contains(r.stdout, `"daemon":`) {
		t.Fatalf("daemon down: exit %d stdout %q", r.code, r.stdout)
	}
}
