package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/shard-dev/shard/internal/sparep"
)

// SchemaVersion is the schema this build writes and understands. Open
// refuses a file with a newer version and migrates an older one in the same
// transaction that opens it (see migrate).
//
// Version 2 added the open_jobs index. It is a version and not just a new
// bucket because an older build would create jobs without indexing them,
// and a later open could not tell: an older build must refuse the file.
// Version 3 added the run_jobs, agent_runs and alias_parents indexes, for
// the same reason: the jobs coordinator reads finished jobs through them
// on demand, so a job an older build wrote unindexed would be lost to it.
//
// Version 4 added the agent indexes and count (agentindex.go), a version
// for the same reason: the registry reads stopped agents through them.
// A file of any older version is migrated step by step (see migrate).
const SchemaVersion = 4

// DefaultLockTimeout is the lock wait Open uses when Options.Timeout is 0.
const DefaultLockTimeout = 2 * time.Second

// Bucket names. Every bucket is created by Open, so methods can rely on it.
const (
	bucketMeta   = "meta"   // key schemaVersionKey: decimal schema version
	bucketAgents = "agents" // key agent_id: Agent JSON

	bucketJobs       = "jobs"        // key job_id: Job JSON (runs embedded)
	bucketParentJobs = "parent_jobs" // key parent_agent_id \x00 job_id (ids sort by time): empty
	bucketAliases    = "aliases"     // key parent_agent_id \x00 normalized alias: agent_id
	bucketRequests   = "requests"    // key parent_agent_id \x00 request_id: job_id
	bucketReports    = "reports"     // key run_id: Report JSON, until delivered
	bucketRuntimes   = "runtimes"    // key agent_id: RuntimeProc JSON while the child lives
	// bucketOpenJobs indexes the jobs that have not ended (EndedAt == 0), so
	// that startup reconciliation reads the unfinished jobs only and costs
	// the same after 100 jobs or 100,000 (schema version 2).
	bucketOpenJobs = "open_jobs" // key job_id: empty, while the job has not ended
	// The jobs coordinator keeps only unfinished jobs in memory and reads
	// the others on demand, each lookup one keyed read (schema version 3):
	// a run's job, an agent's runs in creation order (run ids sort by
	// time), and every parent that binds a normalized alias (jobs.show
	// resolves an alias across parents). Written with the job (createJobOp;
	// a job's runs are fixed at its create), removed with it (DeleteJobs)
	// or with the agent (DeleteAgent, for aliases).
	bucketRunJobs      = "run_jobs"      // key run_id: job_id
	bucketAgentRuns    = "agent_runs"    // key agent_id \x00 run_id: job_id
	bucketAliasParents = "alias_parents" // key normalized alias \x00 parent_agent_id: agent_id

	// The security store (docs/protocol.md §4.1): hashes and metadata only,
	// never a raw code, cookie, ticket or token. See security.go.
	bucketPrincipals  = "principals"      // key principal_id: Principal JSON
	bucketBrowsers    = "browsers"        // key browser_id: Browser JSON
	bucketWebSessions = "web_sessions"    // key session_id: WebSession JSON
	bucketCredentials = "api_credentials" // key token_id: APICredential JSON

	// Workspaces (workspaces.go). Adding them needed no schema bump:
	// initSchema creates missing buckets in an existing file, older builds
	// ignore buckets they do not know, and reads treat a missing one (a
	// file from before, opened read-only) as empty.
	bucketWorkspaces     = "workspaces"      // key workspace_id: Workspace JSON
	bucketWorkspacePaths = "workspace_paths" // key worktree path of a live workspace: workspace_id
)

// allBuckets lists the buckets Open ensures exist. New record kinds add
// their bucket here.
func allBuckets() []string {
	return []string{bucketMeta, bucketAgents, bucketJobs, bucketParentJobs, bucketAliases, bucketRequests, bucketReports, bucketRuntimes, bucketOpenJobs,
		bucketRunJobs, bucketAgentRuns, bucketAliasParents,
		bucketPrincipals, bucketBrowsers, bucketWebSessions, bucketCredentials, bucketWorkspaces, bucketWorkspacePaths,
		bucketAgentsByCreated, bucketAgentChildren, bucketAgentSessions, bucketAgentForks,
		// The team buckets (team.go) need no schema bump: see there.
		bucketGoals, bucketOpenGoals, bucketTasks, bucketTaskGoals, bucketDecisions, bucketGoalDecisions,
		bucketOpenDecisions, bucketMemory, bucketMemoryIDs, bucketMemoryKeys, bucketFeed, bucketFeedAll, bucketGoalRequests}
}

const schemaVersionKey = "schema_version"

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Timeout is how long Open waits for another process to release the
	// database's exclusive file lock before failing with ErrLocked.
	// 0 means DefaultLockTimeout (2s); it never waits forever. Negative is
	// invalid.
	Timeout time.Duration
	// NoSync skips fsync after each commit: faster, but a power loss can
	// lose or corrupt recent commits. For tests and benchmarks. Default
	// false.
	NoSync bool
	// ReadOnly opens an existing file for reading only (offline forensics
	// with shardctl): no file is created, nothing is written, and the lock
	// is shared, so it fails with ErrLocked while a daemon holds the file.
	ReadOnly bool
	// OnCommit, when set, is told how long each write transaction took
	// (commit and fsync included), for metrics. It must not block. Writes
	// are group-committed, so one transaction may carry many writes.
	OnCommit func(time.Duration)
	// BeforeCommit, when set, is called in each write transaction after
	// its writes were applied and before it commits, with how many writes
	// it carries. An error aborts the transaction as a failed commit
	// would: every write in it fails with that error and none is stored.
	// A test hook (fault injection); it must not block.
	BeforeCommit func(writes int) error
	// Spare, when set, is touched before every group commit: its fdatasyncs
	// park the writer's P, and the burst's lender keeps one P more while
	// commits follow each other (package sparep).
	Spare *sparep.Burst
}

// Store is an open Shard database. Its methods are safe for concurrent use
// by multiple goroutines: reads run in parallel, and concurrent writes are
// group-committed (see commit.go): those that arrive while a transaction
// commits share the next one. Every method that writes has committed (and,
// unless NoSync, fsynced) when it returns nil. Close must be called
// exactly once, after all other calls have returned.
type Store struct {
	db           *bolt.DB
	path         string
	onCommit     func(time.Duration)
	beforeCommit func(int) error
	spare        *sparep.Burst
	commits      committer
}

// Open opens the database at path, creating the file (mode 0600) and its
// parent directory (mode 0700) if they are missing. It holds an exclusive
// lock on the file until Close; if another process holds it for longer than
// opts.Timeout, Open fails with an error wrapping ErrLocked that names the
// path. A new file gets the current SchemaVersion; a file with a newer one
// is refused with ErrSchema and left untouched.
func Open(path string, opts Options) (*Store, error) {
	timeout := opts.Timeout
	switch {
	case timeout < 0:
		return nil, fmt.Errorf("%w: open %s: negative lock timeout %s", ErrInvalid, path, timeout)
	case timeout == 0:
		timeout = DefaultLockTimeout
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%w: open %s: %w", ErrNotFound, path, err)
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// The freelist is not written at every commit (NoFreelistSync, as etcd
	// runs bbolt) but rebuilt from the pages at open, in a map: a commit
	// writes its own pages only, however fragmented the file has become
	// (shorter commits, the jobs benchmark's), for a scan of the pages at
	// open. Crash safety is unchanged: the freelist is derived. The scan
	// reads every page; Open gives them back to the kernel once it is done
	// (dropResident), so they do not stay in the daemon's RSS.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, NoSync: opts.NoSync, ReadOnly: opts.ReadOnly,
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %s for its lock; is another shardd running?)", ErrLocked, path, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if opts.ReadOnly {
		st := &Store{db: db, path: path}
		st.dropResident()
		if v, err := st.SchemaVersion(); err != nil || v > SchemaVersion {
			_ = db.Close()
			if err == nil {
				err = fmt.Errorf("%w: %s has schema version %d, newer than %d", ErrSchema, path, v, SchemaVersion)
			}
			return nil, err
		}
		return st, nil
	}
	if err := db.Update(func(tx *bolt.Tx) error { return initSchema(tx, path) }); err != nil {
		_ = db.Close() // the schema error is the one worth reporting
		return nil, wrapOp(err, "open %s", path)
	}
	st := &Store{db: db, path: path, onCommit: opts.OnCommit, beforeCommit: opts.BeforeCommit, spare: opts.Spare}
	st.dropResident()
	return st, nil
}

// initSchema checks the schema version of an existing file, or stamps a
// new one, and creates missing buckets. A newer version aborts before any
// write.
func initSchema(tx *bolt.Tx, path string) error {
	stored := 0 // a new file
	if meta := tx.Bucket([]byte(bucketMeta)); meta != nil {
		if raw := meta.Get([]byte(schemaVersionKey)); raw != nil {
			v, err := parseVersion(raw)
			if err != nil {
				return fmt.Errorf("%w in %s", err, path)
			}
			if v > SchemaVersion {
				return fmt.Errorf("%w: %s has schema version %d, newer than this build's %d; upgrade shardd", ErrSchema, path, v, SchemaVersion)
			}
			stored = v
		}
	}
	for _, name := range allBuckets() {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %q: %w", name, err)
		}
	}
	if stored != 0 && stored < SchemaVersion {
		if err := migrate(tx, stored); err != nil {
			return fmt.Errorf("migrate %s from schema version %d: %w", path, stored, err)
		}
	}
	if stored < SchemaVersion {
		v := []byte(strconv.Itoa(SchemaVersion))
		if err := tx.Bucket([]byte(bucketMeta)).Put([]byte(schemaVersionKey), v); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
	}
	return nil
}

// migrate brings a file of schema version from up to SchemaVersion, inside
// the opening transaction: a crash midway leaves the old version, and the
// next open migrates again.
func migrate(tx *bolt.Tx, from int) error {
	if from < 2 {
		if err := indexOpenJobs(tx); err != nil {
			return err
		}
	}
	if from < 3 {
		if err := indexJobRuns(tx); err != nil {
			return err
		}
	}
	if from < 4 {
		// Version 4: index every agent (agentindex.go).
		if err := indexAgents(tx); err != nil {
			return err
		}
	}
	return nil
}

// indexOpenJobs indexes every job that has not ended (version 2).
func indexOpenJobs(tx *bolt.Tx) error {
	var head struct {
		EndedAt int64 `json:"ended_at"`
	}
	open := tx.Bucket([]byte(bucketOpenJobs))
	return tx.Bucket([]byte(bucketJobs)).ForEach(func(k, v []byte) error {
		head.EndedAt = 0
		if err := json.Unmarshal(v, &head); err != nil {
			return fmt.Errorf("job %q: %w", k, err)
		}
		if head.EndedAt != 0 {
			return nil
		}
		return open.Put(k, nil)
	})
}

// indexJobRuns indexes every job's runs and every alias binding (version
// 3). Only the ids are decoded, not the runs' texts.
func indexJobRuns(tx *bolt.Tx) error {
	var head struct {
		JobID string `json:"job_id"`
		Runs  []struct {
			RunID   string `json:"run_id"`
			AgentID string `json:"agent_id"`
		} `json:"runs"`
	}
	if err := tx.Bucket([]byte(bucketJobs)).ForEach(func(k, v []byte) error {
		head.JobID, head.Runs = "", head.Runs[:0]
		if err := json.Unmarshal(v, &head); err != nil {
			return fmt.Errorf("job %q: %w", k, err)
		}
		j := Job{JobID: string(k)}
		for _, r := range head.Runs {
			j.Runs = append(j.Runs, Run{RunID: r.RunID, AgentID: r.AgentID})
		}
		return indexRuns(tx, &j)
	}); err != nil {
		return err
	}
	ap := tx.Bucket([]byte(bucketAliasParents))
	return tx.Bucket([]byte(bucketAliases)).ForEach(func(k, v []byte) error {
		parent, norm, ok := bytes.Cut(k, []byte{0})
		if !ok {
			return nil // not a key this store writes
		}
		return ap.Put([]byte(scoped(string(norm), string(parent))), v)
	})
}

// parseVersion decodes a stored schema version. string(raw) copies, so
// nothing of bbolt's memory escapes.
func parseVersion(raw []byte) (int, error) {
	v, err := strconv.Atoi(string(raw))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%w: unreadable schema version %q", ErrSchema, raw)
	}
	return v, nil
}

// Close releases the file lock and closes the database.
func (s *Store) Close() error {
	s.commits.idle.Wait() // the writer goroutine is winding down
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.path, err)
	}
	return nil
}

// Path returns the database file path given to Open.
func (s *Store) Path() string { return s.path }

// Size returns the size of the database file in bytes.
func (s *Store) Size() (int64, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, fmt.Errorf("store: size: %w", err)
	}
	return fi.Size(), nil
}

// SchemaVersion returns the schema version recorded in the file.
func (s *Store) SchemaVersion() (int, error) {
	var v int
	err := s.db.View(func(tx *bolt.Tx) error {
		meta, err := bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		raw := meta.Get([]byte(schemaVersionKey))
		if raw == nil {
			return fmt.Errorf("%w: no schema version", ErrSchema)
		}
		v, err = parseVersion(raw)
		return err
	})
	return v, wrapOp(err, "schema version")
}

// Check runs bbolt's consistency check over the whole file and returns the
// first problem found, or nil. It reads every page, so it is for startup,
// tests and ops commands, not for hot paths.
//
// The check runs in a write transaction that is rolled back, never in a
// read-only one: bbolt compares the pages a transaction reaches with the
// database's current freelist, and a writer committing during a read-only
// check frees pages the check's snapshot still reaches ("page N: reachable
// freed", a false alarm on a healthy file). Holding the writer's lock costs
// commits the check's duration and writes nothing. A store opened
// read-only has no writer (the file is locked against one), so its check
// reads.
func (s *Store) Check() error {
	tx, err := s.db.Begin(!s.db.IsReadOnly())
	if err != nil {
		return fmt.Errorf("store: check %s: %w", s.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	var first error
	// Drain the channel fully: the checker goroutine sends every problem
	// and must finish before the transaction closes.
	for err := range tx.Check() {
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("store: check %s: %w", s.path, first)
	}
	return nil
}

// updateAlone runs fn in a write transaction of its own, outside group
// commit (for a large transaction such as startup reconciliation, whose
// fn must run exactly once), and reports how long it took to OnCommit.
func (s *Store) updateAlone(fn func(*bolt.Tx) error) error {
	start := time.Now()
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if s.beforeCommit != nil {
			return s.beforeCommit(1)
		}
		return nil
	})
	if err == nil && s.onCommit != nil {
		s.onCommit(time.Since(start))
	}
	return err
}
