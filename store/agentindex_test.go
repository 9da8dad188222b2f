package store

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shard-dev/shard/protocol"
)

// agentIDs lists the agent ids of a page.
func agentIDs(as []Agent) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.AgentID)
	}
	return out
}

// checkPage asserts one ListAgentsPage answer.
func checkPage(t *testing.T, s *Store, q AgentQuery, want []string, wantMore bool) {
	t.Helper()
	got, more, err := s.ListAgentsPage(q)
	if err != nil || !slices.Equal(agentIDs(got), want) || more != wantMore {
		t.Fatalf("ListAgentsPage(%+v) = %v, more %v, %v; want %v, more %v", q, agentIDs(got), more, err, want, wantMore)
	}
}

// The agent indexes follow every way an agent is written: CreateAgent,
// a job's children (CreateJob), a workspace's agent, UpdateAgent and
// DeleteAgent; pages come in (created_at, agent_id) order with the
// parent and since filters and a cursor position; the count and the
// session lookup agree.
func TestAgentIndexesFollowWrites(t *testing.T) {
	s := openTest(t)
	for _, a := range []Agent{agent("agent-c", 30), agent("agent-a", 10), agent("agent-b", 10)} {
		if err := s.CreateAgent(a); err != nil {
			t.Fatal(err)
		}
	}
	kid1, kid2 := agent("agent-k1", 40), agent("agent-k2", 20)
	kid1.ParentAgentID, kid2.ParentAgentID = "agent-a", "agent-a"
	if _, err := s.CreateJob(testJob("job-1", "agent-a", protocol.RunQueued), []Agent{kid1, kid2}, nil); err != nil {
		t.Fatal(err)
	}
	checkPage(t, s, AgentQuery{}, []string{"agent-a", "agent-b", "agent-k2", "agent-c", "agent-k1"}, false)
	checkPage(t, s, AgentQuery{Limit: 2}, []string{"agent-a", "agent-b"}, true)
	checkPage(t, s, AgentQuery{Limit: 2, After: true, AfterAt: 10, AfterID: "agent-b"}, []string{"agent-k2", "agent-c"}, true)
	checkPage(t, s, AgentQuery{Limit: 2, After: true, AfterAt: 30, AfterID: "agent-c"}, []string{"agent-k1"}, false)
	checkPage(t, s, AgentQuery{SinceMs: 20}, []string{"agent-k2", "agent-c", "agent-k1"}, false)
	checkPage(t, s, AgentQuery{ParentAgentID: "agent-a"}, []string{"agent-k2", "agent-k1"}, false)
	checkPage(t, s, AgentQuery{ParentAgentID: "agent-a", SinceMs: 21}, []string{"agent-k1"}, false)
	checkPage(t, s, AgentQuery{ParentAgentID: "agent-a", Limit: 1, After: true, AfterAt: 20, AfterID: "agent-k2"}, []string{"agent-k1"}, false)
	checkPage(t, s, AgentQuery{ParentAgentID: "agent-b"}, []string{}, false)
	if n, err := s.CountAgents(); err != nil || n != 5 {
		t.Fatalf("CountAgents = %d, %v; want 5", n, err)
	}
	if id, ok, err := s.SessionAdopted("sess-agent-k1"); err != nil || !ok || id != "agent-k1" {
		t.Fatalf("SessionAdopted(sess-agent-k1) = %q, %v, %v; want agent-k1", id, ok, err)
	}

	// An update that changes an indexed field moves its entries.
	if err := s.UpdateAgent("agent-c", func(a *Agent) error { a.CreatedAt, a.SessionID = 5, "sess-new"; return nil }); err != nil {
		t.Fatal(err)
	}
	checkPage(t, s, AgentQuery{Limit: 1}, []string{"agent-c"}, true)
	if _, ok, _ := s.SessionAdopted("sess-agent-c"); ok {
		t.Fatal("the old session id is still indexed after the update")
	}
	if id, ok, _ := s.SessionAdopted("sess-new"); !ok || id != "agent-c" {
		t.Fatalf("SessionAdopted(sess-new) = %q, %v; want agent-c", id, ok)
	}
	if n, _ := s.CountAgents(); n != 5 {
		t.Fatalf("CountAgents after an update = %d; want 5", n)
	}

	// The job must end before its children can go.
	if _, err := s.UpdateJob("job-1", func(j *Job) ([]Report, error) {
		j.Runs[0].State, j.EndedAt = protocol.RunCompleted, 50
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteAgent("agent-k2"); err != nil {
		t.Fatal(err)
	}
	checkPage(t, s, AgentQuery{ParentAgentID: "agent-a"}, []string{"agent-k1"}, false)
	checkPage(t, s, AgentQuery{}, []string{"agent-c", "agent-a", "agent-b", "agent-k1"}, false)
	if _, ok, _ := s.SessionAdopted("sess-agent-k2"); ok {
		t.Fatal("a deleted agent's session is still indexed")
	}
	if n, _ := s.CountAgents(); n != 4 {
		t.Fatalf("CountAgents after a delete = %d; want 4", n)
	}
}

// A file of schema version 2 (no agent indexes, no count) is indexed at
// open, in the opening transaction.
func TestOpenMigratesAgentIndexes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	kid := agent("agent-k", 3)
	kid.ParentAgentID, kid.SessionDir = "agent-p", "sess-agent-p/forks/f1"
	for _, a := range []Agent{agent("agent-p", 2), kid, agent("agent-o", 1)} {
		if err := s.CreateAgent(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it the file a version-2 build left.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{bucketAgentsByCreated, bucketAgentChildren, bucketAgentSessions, bucketAgentForks} {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		meta := tx.Bucket([]byte(bucketMeta))
		if err := meta.Delete([]byte(agentCountKey)); err != nil {
			return err
		}
		return meta.Put([]byte(schemaVersionKey), []byte("2"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path)
	if v, err := s.SchemaVersion(); err != nil || v != SchemaVersion {
		t.Fatalf("migrated version = %d, %v; want %d", v, err, SchemaVersion)
	}
	checkPage(t, s, AgentQuery{}, []string{"agent-o", "agent-p", "agent-k"}, false)
	checkPage(t, s, AgentQuery{ParentAgentID: "agent-p"}, []string{"agent-k"}, false)
	if n, err := s.CountAgents(); err != nil || n != 3 {
		t.Fatalf("CountAgents = %d, %v; want 3", n, err)
	}
	if id, ok, _ := s.SessionAdopted("sess-agent-o"); !ok || id != "agent-o" {
		t.Fatalf("SessionAdopted = %q, %v; want agent-o", id, ok)
	}
	for rel, want := range map[string][]string{"sess-agent-p": {"sess-agent-p/forks/f1"}, "sess-agent": nil, "sess-agent-p/forks/f1": {"sess-agent-p/forks/f1"}} {
		if got, err := s.SessionDirsUnder(rel); err != nil || !slices.Equal(got, want) {
			t.Fatalf("SessionDirsUnder(%q) = %v, %v; want %v", rel, got, err, want)
		}
	}
}

// An order key parses back to what made it, and keys sort as agent.list
// orders agents (created_at, then agent_id); a short key is refused.
func FuzzCreatedKey(f *testing.F) {
	f.Add(int64(0), "agent-a", int64(1), "agent-b")
	f.Add(int64(-5), "", int64(-5), "x")
	f.Add(int64(1<<62), "agent-z", int64(-(1 << 62)), "agent-a")
	f.Fuzz(func(t *testing.T, at1 int64, id1 string, at2 int64, id2 string) {
		k1, k2 := createdKey(at1, id1), createdKey(at2, id2)
		if at, id, ok := parseCreatedKey(k1); !ok || at != at1 || id != id1 {
			t.Fatalf("parseCreatedKey(createdKey(%d, %q)) = %d, %q, %v", at1, id1, at, id, ok)
		}
		want := cmpOrder(at1, id1, at2, id2)
		if got := bytesCompare(k1, k2); got != want {
			t.Fatalf("keys of (%d, %q) and (%d, %q) compare %d, want %d", at1, id1, at2, id2, got, want)
		}
		if _, _, ok := parseCreatedKey(k1[:min(len(k1), 7)]); ok {
			t.Fatal("a key shorter than its time parsed")
		}
	})
}

func cmpOrder(at1 int64, id1 string, at2 int64, id2 string) int {
	switch {
	case at1 < at2:
		return -1
	case at1 > at2:
		return 1
	case id1 < id2:
		return -1
	case id1 > id2:
		return 1
	}
	return 0
}

func bytesCompare(a, b []byte) int { return strings.Compare(string(a), string(b)) }
