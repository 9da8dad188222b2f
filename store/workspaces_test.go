package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/shard-dev/shard/protocol"
)

// workspace returns a minimal live record of repository repo.
func workspace(id, repo string, createdAt int64) Workspace {
	return Workspace{
		WorkspaceID: id, Ownership: protocol.OwnershipManaged,
		RepoRoot: repo, CommonDir: repo + "/.git", WorktreePath: "/home/u/.shard/worktrees/" + id,
		Branch: "shard/" + id, State: protocol.WorkspaceStateActive, CreatedAt: createdAt, UpdatedAt: createdAt,
	}
}

// fullWorkspace has every field set.
func fullWorkspace() Workspace {
	return Workspace{
		WorkspaceID: "workspace-full", Label: "parser", Ownership: protocol.OwnershipManaged,
		RepoRoot: "/src/proj", CommonDir: "/src/proj/.git", WorktreePath: "/home/u/.shard/worktrees/proj/workspace-full",
		Branch: "shard/parser", BaseRef: "main", BaseSHA: "1111", IntegrationTarget: "main", HeadSHA: "2222",
		State: protocol.WorkspaceStateRetired, ConflictReason: "was on another branch",
		CreatedAt: 10, UpdatedAt: 20, RetiredAt: 30, AgentIDs: []string{"agent-1", "agent-2"},
		Tombstone: &WorkspaceTombstone{Branch: "shard/parser", HeadSHA: "2222", Deleted: true,
			Disposition: protocol.DispositionDeleteConfirmed, Proof: protocol.ProofConfirmed},
		CreatedPath: &CreatedPath{Path: "/home/u/.shard/worktrees/proj/workspace-full", Dev: 2049, Ino: 77, Token: "tok-secret-123", CreatedAt: 10},
	}
}

func retire(w *Workspace, at int64) {
	w.State, w.RetiredAt = protocol.WorkspaceStateRetired, at
	w.Tombstone = &WorkspaceTombstone{Branch: w.Branch, HeadSHA: w.HeadSHA}
}

func ids(ws []Workspace) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.WorkspaceID)
	}
	return out
}

func TestWorkspaceRoundTrip(t *testing.T) {
	s := openTest(t)
	full := fullWorkspace()
	for _, w := range []Workspace{workspace("workspace-c", "/src/a", 5), full, workspace("workspace-b", "/src/b", 5), workspace("workspace-a", "/src/a", 7)} {
		if err := s.CreateWorkspace(w); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetWorkspace(full.WorkspaceID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, full) {
		t.Fatalf("GetWorkspace =\n%+v\nwant\n%+v", got, full)
	}
	// A copy: changing it changes nothing stored.
	got.AgentIDs[0], got.Tombstone.Branch, got.CreatedPath.Token = "x", "x", "x"
	if again, _ := s.GetWorkspace(full.WorkspaceID); !reflect.DeepEqual(again, full) {
		t.Fatalf("stored workspace changed through a returned copy: %+v", again)
	}

	for _, tt := range []struct {
		f    WorkspaceFilter
		want []string
	}{
		{WorkspaceFilter{}, []string{"workspace-b", "workspace-c", "workspace-a"}},
		{WorkspaceFilter{IncludeRetired: true}, []string{"workspace-b", "workspace-c", "workspace-a", "workspace-full"}},
		{WorkspaceFilter{RepoRoot: "/src/a"}, []string{"workspace-c", "workspace-a"}},
		{WorkspaceFilter{RepoRoot: "/src/proj"}, []string{}},
		{WorkspaceFilter{RepoRoot: "/src/proj", IncludeRetired: true}, []string{"workspace-full"}},
		{WorkspaceFilter{RepoRoot: "/elsewhere", IncludeRetired: true}, []string{}},
	} {
		list, err := s.ListWorkspaces(tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if list == nil || !reflect.DeepEqual(ids(list), tt.want) {
			t.Errorf("ListWorkspaces(%+v) = %v, want %v", tt.f, ids(list), tt.want)
		}
	}

	if _, err := s.GetWorkspace("workspace-nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetWorkspace(unknown) = %v, want ErrNotFound", err)
	}
	w, err := s.WorkspaceByPath("/home/u/.shard/worktrees/workspace-a")
	if err != nil || w.WorkspaceID != "workspace-a" {
		t.Errorf("WorkspaceByPath = %+v, %v", w, err)
	}
	// A retired record no longer holds its path.
	if _, err := s.WorkspaceByPath(full.WorktreePath); !errors.Is(err, ErrNotFound) {
		t.Errorf("WorkspaceByPath(retired) = %v, want ErrNotFound", err)
	}
}

func TestCreateWorkspaceRefusals(t *testing.T) {
	s := openTest(t)
	first := workspace("workspace-1", "/src/a", 1)
	if err := s.CreateWorkspace(first); err != nil {
		t.Fatal(err)
	}
	sameID := workspace("workspace-1", "/src/b", 2)
	sameID.WorktreePath = "/elsewhere"
	err := s.CreateWorkspace(sameID)
	if !errors.Is(err, ErrConflict) || !errors.Is(err, ErrExists) {
		t.Errorf("same id: %v, want ErrConflict and ErrExists", err)
	}
	samePath := workspace("workspace-2", "/src/a", 2)
	samePath.WorktreePath = first.WorktreePath
	if err := s.CreateWorkspace(samePath); !errors.Is(err, ErrConflict) || errors.Is(err, ErrExists) {
		t.Errorf("same live path: %v, want ErrConflict only", err)
	}
	if _, err := s.GetWorkspace("workspace-2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused create wrote its record: %v", err)
	}
	// A retired record at the path does not block it: retire the first,
	// then the path is free.
	if _, err := s.UpdateWorkspace("workspace-1", func(w *Workspace) error { retire(w, 5); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWorkspace(samePath); err != nil {
		t.Errorf("create at a retired workspace's path: %v", err)
	}
	// A retired record may be created directly (a create that failed
	// before its first git step), and claims nothing.
	dead := workspace("workspace-3", "/src/a", 3)
	dead.WorktreePath = samePath.WorktreePath
	retire(&dead, 4)
	if err := s.CreateWorkspace(dead); err != nil {
		t.Errorf("create retired at a live path: %v", err)
	}
	if w, err := s.WorkspaceByPath(samePath.WorktreePath); err != nil || w.WorkspaceID != "workspace-2" {
		t.Errorf("path holder = %+v, %v; want workspace-2", w, err)
	}

	bad := func(edit func(*Workspace)) Workspace {
		w := workspace("workspace-bad", "/src/a", 1)
		w.WorktreePath = "/wt/bad"
		edit(&w)
		return w
	}
	for name, w := range map[string]Workspace{
		"no id":                  bad(func(w *Workspace) { w.WorkspaceID = "" }),
		"no ownership":           bad(func(w *Workspace) { w.Ownership = "" }),
		"bad state":              bad(func(w *Workspace) { w.State = "gone" }),
		"no branch":              bad(func(w *Workspace) { w.Branch = "" }),
		"relative worktree":      bad(func(w *Workspace) { w.WorktreePath = "wt/bad" }),
		"unclean worktree":       bad(func(w *Workspace) { w.WorktreePath = "/wt/../wt/bad" }),
		"trailing slash":         bad(func(w *Workspace) { w.RepoRoot = "/src/a/" }),
		"no common dir":          bad(func(w *Workspace) { w.CommonDir = "" }),
		"retired, no tombstone":  bad(func(w *Workspace) { w.State, w.RetiredAt = protocol.WorkspaceStateRetired, 9 }),
		"retired, no retired_at": bad(func(w *Workspace) { retire(w, 0) }),
		"empty agent":            bad(func(w *Workspace) { w.AgentIDs = []string{"agent-1", ""} }),
		"agent twice":            bad(func(w *Workspace) { w.AgentIDs = []string{"agent-1", "agent-2", "agent-1"} }),
	} {
		if err := s.CreateWorkspace(w); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: CreateWorkspace = %v, want ErrInvalid", name, err)
		}
	}
	if list, _ := s.ListWorkspaces(WorkspaceFilter{IncludeRetired: true}); len(list) != 3 {
		t.Errorf("invalid creates wrote records: %v", ids(list))
	}
}

func TestUpdateWorkspace(t *testing.T) {
	s := openTest(t)
	a, b := workspace("workspace-a", "/src/a", 1), workspace("workspace-b", "/src/a", 2)
	for _, w := range []Workspace{a, b} {
		if err := s.CreateWorkspace(w); err != nil {
			t.Fatal(err)
		}
	}

	// Compare-and-set: fn refuses, nothing is written.
	errMoved := fmt.Errorf("%w: not active", ErrConflict)
	_, err := s.UpdateWorkspace("workspace-a", func(w *Workspace) error {
		w.Label = "changed"
		if w.State != protocol.WorkspaceStateCreating {
			return errMoved
		}
		return nil
	})
	if !errors.Is(err, errMoved) {
		t.Errorf("refused update = %v, want fn's error", err)
	}
	if got, _ := s.GetWorkspace("workspace-a"); got.Label != "" {
		t.Errorf("a refused update wrote: %+v", got)
	}

	got, err := s.UpdateWorkspace("workspace-a", func(w *Workspace) error {
		w.HeadSHA, w.UpdatedAt, w.State = "abcd", 9, protocol.WorkspaceStateMissing
		return nil
	})
	if err != nil || got.HeadSHA != "abcd" || got.State != protocol.WorkspaceStateMissing {
		t.Fatalf("update = %+v, %v", got, err)
	}
	if stored, _ := s.GetWorkspace("workspace-a"); !reflect.DeepEqual(stored, got) {
		t.Errorf("returned %+v, stored %+v", got, stored)
	}

	for name, tt := range map[string]struct {
		id   string
		fn   func(*Workspace) error
		want error
	}{
		"unknown id":       {"workspace-x", func(*Workspace) error { return nil }, ErrNotFound},
		"id changed":       {"workspace-a", func(w *Workspace) error { w.WorkspaceID = "workspace-z"; return nil }, ErrInvalid},
		"made invalid":     {"workspace-a", func(w *Workspace) error { w.Branch = ""; return nil }, ErrInvalid},
		"onto a live path": {"workspace-a", func(w *Workspace) error { w.WorktreePath = b.WorktreePath; return nil }, ErrConflict},
	} {
		if _, err := s.UpdateWorkspace(tt.id, tt.fn); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", name, err, tt.want)
		}
	}

	// Moving a live record moves its claim.
	moved := "/home/u/.shard/worktrees/moved"
	if _, err := s.UpdateWorkspace("workspace-a", func(w *Workspace) error { w.WorktreePath = moved; return nil }); err != nil {
		t.Fatal(err)
	}
	if w, err := s.WorkspaceByPath(moved); err != nil || w.WorkspaceID != "workspace-a" {
		t.Errorf("new path = %+v, %v", w, err)
	}
	if _, err := s.WorkspaceByPath(a.WorktreePath); !errors.Is(err, ErrNotFound) {
		t.Errorf("old path still claimed: %v", err)
	}
	// Retiring releases it; un-retiring (a repair) claims it again, unless
	// another live record took it meanwhile.
	if _, err := s.UpdateWorkspace("workspace-a", func(w *Workspace) error { retire(w, 10); return nil }); err != nil {
		t.Fatal(err)
	}
	taker := workspace("workspace-c", "/src/a", 3)
	taker.WorktreePath = moved
	if err := s.CreateWorkspace(taker); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateWorkspace("workspace-a", func(w *Workspace) error {
		w.State, w.RetiredAt, w.Tombstone = protocol.WorkspaceStateActive, 0, nil
		return nil
	}); !errors.Is(err, ErrConflict) {
		t.Errorf("un-retire onto a taken path = %v, want ErrConflict", err)
	}
	if w, err := s.WorkspaceByPath(moved); err != nil || w.WorkspaceID != "workspace-c" {
		t.Errorf("path holder = %+v, %v; want workspace-c", w, err)
	}
}

func TestWorkspaceBindings(t *testing.T) {
	s := openTest(t)
	if err := s.CreateWorkspace(workspace("workspace-1", "/src/a", 1)); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"agent-1", "agent-2", "agent-1"} {
		if _, err := s.BindWorkspaceAgent("workspace-1", a); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.GetWorkspace("workspace-1")
	if err != nil || !reflect.DeepEqual(w.AgentIDs, []string{"agent-1", "agent-2"}) {
		t.Fatalf("bindings = %v, %v", w.AgentIDs, err)
	}
	if _, err := s.BindWorkspaceAgent("workspace-1", ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("bind empty = %v, want ErrInvalid", err)
	}
	if _, err := s.BindWorkspaceAgent("workspace-x", "agent-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bind to unknown = %v, want ErrNotFound", err)
	}
	w, err = s.UnbindWorkspaceAgent("workspace-1", "agent-1")
	if err != nil || !reflect.DeepEqual(w.AgentIDs, []string{"agent-2"}) {
		t.Fatalf("after unbind = %v, %v", w.AgentIDs, err)
	}
	if w, err = s.UnbindWorkspaceAgent("workspace-1", "agent-9"); err != nil || len(w.AgentIDs) != 1 {
		t.Errorf("unbind of an unbound agent = %v, %v", w.AgentIDs, err)
	}

	if _, err := s.UpdateWorkspace("workspace-1", func(w *Workspace) error { w.State = protocol.WorkspaceStateRetiring; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BindWorkspaceAgent("workspace-1", "agent-3"); !errors.Is(err, ErrConflict) {
		t.Errorf("bind to a retiring workspace = %v, want ErrConflict", err)
	}
	// Unbinding works in any state: the last agent leaves a retiring one.
	if w, err = s.UnbindWorkspaceAgent("workspace-1", "agent-2"); err != nil || w.AgentIDs != nil {
		t.Errorf("unbind from a retiring workspace = %v, %v", w.AgentIDs, err)
	}
}

func TestCreateWorkspaceAgent(t *testing.T) {
	s := openTest(t)
	ws := workspace("workspace-1", "/src/a", 1)
	if err := s.CreateWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	a := Agent{AgentID: "agent-1", SessionID: "sess-1", Cwd: ws.WorktreePath, CreatedAt: 5}
	w, err := s.CreateWorkspaceAgent("workspace-1", a)
	if err != nil || !reflect.DeepEqual(w.AgentIDs, []string{"agent-1"}) {
		t.Fatalf("CreateWorkspaceAgent = %+v, %v", w, err)
	}
	if got, err := s.GetAgent("agent-1"); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("agent = %+v, %v", got, err)
	}

	elsewhere := Agent{AgentID: "agent-2", SessionID: "sess-2", Cwd: "/src/a", CreatedAt: 6}
	taken := Agent{AgentID: "agent-1", SessionID: "sess-9", Cwd: ws.WorktreePath, CreatedAt: 7}
	for name, tt := range map[string]struct {
		id   string
		a    Agent
		want error
	}{
		"not in the worktree": {"workspace-1", elsewhere, ErrInvalid},
		"agent id taken":      {"workspace-1", taken, ErrExists},
		"invalid agent":       {"workspace-1", Agent{AgentID: "agent-3", Cwd: ws.WorktreePath}, ErrInvalid},
		"unknown workspace":   {"workspace-x", Agent{AgentID: "agent-4", SessionID: "s", Cwd: ws.WorktreePath}, ErrNotFound},
	} {
		if _, err := s.CreateWorkspaceAgent(tt.id, tt.a); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", name, err, tt.want)
		}
	}
	if got, _ := s.GetAgent("agent-1"); got.SessionID != "sess-1" {
		t.Errorf("a refused create overwrote the agent: %+v", got)
	}
	if _, err := s.GetAgent("agent-2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused create wrote its agent: %v", err)
	}
	if w, _ := s.GetWorkspace("workspace-1"); !reflect.DeepEqual(w.AgentIDs, []string{"agent-1"}) {
		t.Errorf("refused creates changed the bindings: %v", w.AgentIDs)
	}

	if _, err := s.UpdateWorkspace("workspace-1", func(w *Workspace) error { retire(w, 9); return nil }); err != nil {
		t.Fatal(err)
	}
	late := Agent{AgentID: "agent-5", SessionID: "sess-5", Cwd: ws.WorktreePath}
	if _, err := s.CreateWorkspaceAgent("workspace-1", late); !errors.Is(err, ErrConflict) {
		t.Errorf("create in a retired workspace = %v, want ErrConflict", err)
	}
	if _, err := s.GetAgent("agent-5"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused create wrote its agent: %v", err)
	}
}

// TestBindWorkspaceAgentConcurrent binds from many goroutines at once
// (their writes share group-committed transactions) and loses none.
func TestBindWorkspaceAgentConcurrent(t *testing.T) {
	s := openTest(t)
	if err := s.CreateWorkspace(workspace("workspace-1", "/src/a", 1)); err != nil {
		t.Fatal(err)
	}
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.BindWorkspaceAgent("workspace-1", fmt.Sprintf("agent-%02d", i))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.GetWorkspace("workspace-1")
	if err != nil || len(w.AgentIDs) != n {
		t.Fatalf("%d bindings (%v), want %d", len(w.AgentIDs), err, n)
	}
}

// TestWorkspacesInAnOlderFile opens a file without the workspace buckets
// (as a build before them wrote it): read-only it reads as empty; read-write
// Open adds the buckets without a schema bump, and records persist.
func TestWorkspacesInAnOlderFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{bucketWorkspaces, bucketWorkspacePaths} {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := ro.ListWorkspaces(WorkspaceFilter{IncludeRetired: true}); err != nil || list == nil || len(list) != 0 {
		t.Errorf("read-only ListWorkspaces = %v, %v; want empty", list, err)
	}
	if _, err := ro.GetWorkspace("workspace-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("read-only GetWorkspace = %v, want ErrNotFound", err)
	}
	if _, err := ro.WorkspaceByPath("/wt"); !errors.Is(err, ErrNotFound) {
		t.Errorf("read-only WorkspaceByPath = %v, want ErrNotFound", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	rw, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rw.SchemaVersion(); err != nil || v != SchemaVersion {
		t.Errorf("schema version = %d, %v; want %d (a new bucket is no bump)", v, err, SchemaVersion)
	}
	w := workspace("workspace-1", "/src/a", 1)
	if err := rw.CreateWorkspace(w); err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	again := openAt(t, path)
	if got, err := again.GetWorkspace("workspace-1"); err != nil || !reflect.DeepEqual(got, w) {
		t.Errorf("after reopen = %+v, %v", got, err)
	}
	if got, err := again.WorkspaceByPath(w.WorktreePath); err != nil || got.WorkspaceID != w.WorkspaceID {
		t.Errorf("path after reopen = %+v, %v", got, err)
	}
}

// TestWorkspaceInfo checks the projection: the wire fields come from the
// record, and the common dir and the created-path marker never appear.
func TestWorkspaceInfo(t *testing.T) {
	w := fullWorkspace()
	info := w.Info()
	want := protocol.WorkspaceInfo{
		WorkspaceID: "workspace-full", Label: "parser", Cwd: w.WorktreePath, RepositoryCwd: "/src/proj",
		Ownership: protocol.OwnershipManaged, State: protocol.WorkspaceStateRetired, Branch: "shard/parser",
		BaseRef: "main", BaseSHA: "1111", IntegrationTarget: "main", HeadSHA: "2222",
		CreatedAt: 10, UpdatedAt: 20, RetiredAt: 30, AgentCount: 2, AgentIDs: []string{"agent-1", "agent-2"},
		ConflictReason: "was on another branch",
		Tombstone:      &protocol.WorkspaceTombstone{Branch: "shard/parser", HeadSHA: "2222", Deleted: true},
	}
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("Info =\n%+v\nwant\n%+v", info, want)
	}
	info.AgentIDs[0] = "x"
	if w.AgentIDs[0] != "agent-1" {
		t.Error("Info shares the record's binding slice")
	}
	raw, err := json.Marshal(w.Info())
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{w.CommonDir, "/.git", "common", "tok-secret-123", "created_path", `"ino"`, `"dev"`} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("projection leaks %q: %s", secret, raw)
		}
	}
}
