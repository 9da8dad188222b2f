package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// openTest opens a fresh store in t.TempDir and, at cleanup, checks the
// file's consistency and closes it.
func openTest(t *testing.T) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "shard.db"))
}

func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Check(); err != nil {
			t.Errorf("Check at cleanup: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func agent(id string, createdAt int64) Agent {
	return Agent{AgentID: id, SessionID: "sess-" + id, Cwd: "/work/" + id, CreatedAt: createdAt}
}

func TestAgentRoundTrip(t *testing.T) {
	s := openTest(t)
	full := Agent{
		AgentID: "agent-b", SessionID: "sess-b", Cwd: "/repo", Name: "builder",
		Model: "sim-1", Provider: "sim", Mode: "code", Tools: []string{"read", "bash"},
		HeadlessPolicy: "queue", ParentAgentID: "agent-a", CreatedAt: 2000, Depth: 1,
		LaunchPolicy: &LaunchPolicy{MaxTasks: 4, MaxDepth: 2}, Alias: "b",
		DefinitionName: "builder-def", DisplayName: "Builder",
	}
	// Insert out of order; two share a CreatedAt and sort by id.
	for _, a := range []Agent{full, agent("agent-c", 1000), agent("agent-a", 1000), agent("agent-0", 3000)} {
		if err := s.CreateAgent(a); err != nil {
			t.Fatal(err)
		}
	}

	got, err := s.GetAgent("agent-b")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, full) {
		t.Fatalf("GetAgent =\n%+v\nwant\n%+v", got, full)
	}
	// The returned value is a copy: changing it changes nothing stored.
	got.Tools[0] = "mutated"
	got.LaunchPolicy.MaxTasks = 99
	if again, _ := s.GetAgent("agent-b"); !reflect.DeepEqual(again, full) {
		t.Fatalf("stored agent changed through a returned copy: %+v", again)
	}

	list, err := s.ListAgents()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range list {
		ids = append(ids, a.AgentID)
	}
	if want := []string{"agent-a", "agent-c", "agent-b", "agent-0"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("ListAgents order = %v, want %v", ids, want)
	}

	err = s.UpdateAgent("agent-b", func(a *Agent) error {
		a.DisplayName = "Renamed"
		a.Tools = append(a.Tools, "edit")
		a.LaunchPolicy = nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.GetAgent("agent-b")
	if err != nil {
		t.Fatal(err)
	}
	want := full
	want.DisplayName, want.Tools, want.LaunchPolicy = "Renamed", []string{"read", "bash", "edit"}, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after update =\n%+v\nwant\n%+v", got, want)
	}
}

func TestListAgentsEmpty(t *testing.T) {
	list, err := openTest(t).ListAgents()
	if err != nil || list == nil || len(list) != 0 {
		t.Fatalf("ListAgents on an empty store = %#v, %v; want empty non-nil", list, err)
	}
}

func TestAgentErrors(t *testing.T) {
	s := openTest(t)
	if err := s.CreateAgent(agent("agent-1", 1)); err != nil {
		t.Fatal(err)
	}
	errFn := errors.New("caller says no")
	tests := []struct {
		name string
		op   func() error
		want error
		text string // substring the message must contain
	}{
		{"duplicate create", func() error { return s.CreateAgent(agent("agent-1", 2)) }, ErrExists, `"agent-1"`},
		{"get missing", func() error { _, err := s.GetAgent("agent-x"); return err }, ErrNotFound, `"agent-x"`},
		{"update missing", func() error {
			return s.UpdateAgent("agent-x", func(*Agent) error { return nil })
		}, ErrNotFound, `"agent-x"`},
		{"create without id", func() error { a := agent("", 1); return s.CreateAgent(a) }, ErrInvalid, "agent_id"},
		{"create without session", func() error {
			a := agent("agent-2", 1)
			a.SessionID = ""
			return s.CreateAgent(a)
		}, ErrInvalid, "session_id"},
		{"create without cwd", func() error {
			a := agent("agent-2", 1)
			a.Cwd = ""
			return s.CreateAgent(a)
		}, ErrInvalid, "cwd"},
		{"update changes id", func() error {
			return s.UpdateAgent("agent-1", func(a *Agent) error { a.AgentID = "agent-9"; return nil })
		}, ErrInvalid, "may not change"},
		{"update clears cwd", func() error {
			return s.UpdateAgent("agent-1", func(a *Agent) error { a.Cwd = ""; return nil })
		}, ErrInvalid, "cwd"},
		{"update fn fails", func() error {
			return s.UpdateAgent("agent-1", func(a *Agent) error { a.Name = "half-done"; return errFn })
		}, errFn, `update agent "agent-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "store: ") || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("message %q: want prefix \"store: \" and %q", err, tt.text)
			}
		})
	}
	// None of the failed operations wrote anything.
	got, err := s.GetAgent("agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := agent("agent-1", 1); !reflect.DeepEqual(got, want) {
		t.Fatalf("agent-1 = %+v after failed operations, want %+v", got, want)
	}
	if _, err := s.GetAgent("agent-2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("invalid agent-2 was stored: %v", err)
	}
}

// UpdateAgent is one read-modify-write transaction, so concurrent
// increments are never lost.
func TestUpdateAgentConcurrent(t *testing.T) {
	s := openTest(t)
	if err := s.CreateAgent(agent("agent-1", 1)); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			errs <- s.UpdateAgent("agent-1", func(a *Agent) error { a.Depth++; return nil })
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if a, _ := s.GetAgent("agent-1"); a.Depth != n {
		t.Fatalf("Depth = %d after %d concurrent increments", a.Depth, n)
	}
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.SchemaVersion(); err != nil || v != SchemaVersion {
		t.Fatalf("new db SchemaVersion = %d, %v; want %d", v, err, SchemaVersion)
	}
	if err := s.CreateAgent(agent("agent-1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path)
	if s.Path() != path {
		t.Fatalf("Path = %q, want %q", s.Path(), path)
	}
	if v, err := s.SchemaVersion(); err != nil || v != SchemaVersion {
		t.Fatalf("reopened SchemaVersion = %d, %v; want %d", v, err, SchemaVersion)
	}
	if a, err := s.GetAgent("agent-1"); err != nil || a.Cwd != "/work/agent-1" {
		t.Fatalf("after reopen GetAgent = %+v, %v", a, err)
	}
	size, err := s.Size()
	if err != nil || size <= 0 {
		t.Fatalf("Size = %d, %v", size, err)
	}
	if fi, _ := os.Stat(path); fi.Size() != size {
		t.Fatalf("Size = %d, file is %d bytes", size, fi.Size())
	}
}

// TestFreelistEitherWay: a store written with the freelist synced (every
// store before NoFreelistSync, and bbolt's default) opens, takes writes
// that reuse its free pages, and checks clean; the file then opens with
// bbolt's defaults again and checks clean there too.
func TestFreelistEitherWay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Older writes, with a synced freelist: records put and deleted, so
	// the file has free pages to list.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		err := db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(bucketMeta))
			if err := b.Put([]byte("pad-"+strconv.Itoa(i)), make([]byte, 8<<10)); err != nil {
				return err
			}
			if i%2 == 1 {
				return b.Delete([]byte("pad-" + strconv.Itoa(i-1)))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := s.CreateAgent(agent("agent-"+strconv.Itoa(i), int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check after writes over a synced freelist: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("the file read back with bbolt's defaults: %v", err)
	}
	s = openAt(t, path)
	if _, err := s.GetAgent("agent-19"); err != nil {
		t.Fatal(err)
	}
}

// setSchemaVersion rewrites the stored version with bbolt directly, as a
// newer (or broken) build would have left it.
func setSchemaVersion(t *testing.T, path, version string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(schemaVersionKey), []byte(version))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSchemaRefused(t *testing.T) {
	for _, version := range []string{strconv.Itoa(SchemaVersion + 1), "999", "0", "one"} {
		t.Run(version, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "shard.db")
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			setSchemaVersion(t, path, version)

			s, err = Open(path, Options{})
			if !errors.Is(err, ErrSchema) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("Open with schema %q: err = %v, want ErrSchema", version, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("message %q does not name the file", err)
			}
			// The refused file was not touched: the version is still there,
			// and the lock was released.
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			_ = db.View(func(tx *bolt.Tx) error {
				if got := string(tx.Bucket([]byte(bucketMeta)).Get([]byte(schemaVersionKey))); got != version {
					t.Errorf("stored version = %q, want %q", got, version)
				}
				return nil
			})
		})
	}
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home", "nested")
	path := filepath.Join(dir, "shard.db")
	openAt(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("db file mode = %o, want 600", mode)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o700 {
			t.Errorf("created dir %s mode = %o, want 700", d, mode)
		}
	}
}

func TestCheckClean(t *testing.T) {
	s := openTest(t)
	for i := range 200 {
		a := agent(fmt.Sprintf("agent-%03d", i), int64(i))
		if err := s.CreateAgent(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check on a good db: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "a.db"), Options{Timeout: -time.Second}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative timeout: err = %v, want ErrInvalid", err)
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a bbolt file ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(junk, Options{}); err == nil || !strings.Contains(err.Error(), junk) {
		if s != nil {
			s.Close()
		}
		t.Errorf("junk file: err = %v, want an error naming %s", err, junk)
	}
}

// bbolt locks with flock(2). On Linux two open file descriptions conflict
// even within one process, so a second Open here behaves as a second
// shardd would.
func TestLockTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	first := openAt(t, path)

	second, err := Open(path, Options{Timeout: 200 * time.Millisecond})
	if err == nil {
		second.Close()
		t.Fatal("second Open of a locked db succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("message %q does not name %s", err, path)
	}

	// The first handle is unharmed.
	if err := first.CreateAgent(agent("agent-1", 1)); err != nil {
		t.Fatalf("first handle after the failed open: %v", err)
	}
	if _, err := first.GetAgent("agent-1"); err != nil {
		t.Fatal(err)
	}
}

func TestReadOnlyOpenAndCommitHook(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	if _, err := Open(path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read-only open of a missing file: %v, want ErrNotFound", err)
	}
	commits := 0
	s, err := Open(path, Options{OnCommit: func(d time.Duration) {
		if d <= 0 {
			t.Errorf("commit duration %s", d)
		}
		commits++
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAgent(Agent{AgentID: "agent-1", SessionID: "sess-1", Cwd: "/x"}); err != nil {
		t.Fatal(err)
	}
	if commits != 1 {
		t.Fatalf("OnCommit called %d times, want 1", commits)
	}
	// While the writer holds the file, a read-only open fails fast.
	if _, err := Open(path, Options{ReadOnly: true, Timeout: 200 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only open while locked: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(path, Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	defer ro.Close()
	if a, err := ro.GetAgent("agent-1"); err != nil || a.Cwd != "/x" {
		t.Fatalf("read-only read = %+v, %v", a, err)
	}
	if err := ro.CreateAgent(Agent{AgentID: "agent-2", SessionID: "s", Cwd: "/y"}); err == nil {
		t.Fatal("a read-only store accepted a write")
	}
}
