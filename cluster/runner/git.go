package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/workspaces/git"
)

// Git makes claimed runs' worktrees from their shared remote and pushes
// their branches back. Everything it makes is under Root, owner-only: a
// bare cache repository per remote (repos/<hash of the remote>.git), into
// which the remote is fetched, and one work tree per run
// (worktrees/<run_id>): a clone of the cache sharing its objects, a
// repository of its own with its main checkout on the run's branch and
// the remote as its origin, so a child there may make isolated runs of
// its own (anywhere runs of the same remote) as its parent did; a linked
// worktree of the bare cache would have no main checkout to branch from.
// Its methods are safe for concurrent use: the steps on one cache are
// serialized.
//
// Every git it runs is the real git through Runner (no shell, a timeout,
// no prompts) with an environment of its own: no system or global git
// configuration (the user's ~/.gitconfig is never read) and Shard's own
// identity for the commits it makes, so what a node does to a run's
// branch never depends on whose account runs the daemon.
type Git struct {
	// Root is where the caches and worktrees go (the daemon's
	// <home>/cluster/runs); required.
	Root string
	// Runner runs git; Env returns what it needs in its environment.
	// nil: a git.Exec with Env.
	Runner git.Runner
	// Node names this node in the commits it makes.
	Node string

	locks git.Locks

	mu sync.Mutex // protects resumed
	// resumed counts, by directory, the relaunches of this node working
	// in a child's work tree now: from Resume until Leave. Only a
	// relaunch goes on in a work tree another run made, so these are the
	// work trees a Release or Retire of an earlier run must not take.
	resumed map[string]int
}

// Identity of the commits a node makes for a run.
const (
	commitName  = "Shard"
	commitEmail = "shard@localhost"
)

// Env is the environment every git of a Git runs with, on top of
// git.Exec's scrubbed one: no system or global configuration, Shard's
// identity, no hooks from anywhere.
func Env() []string {
	return []string{
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_AUTHOR_NAME=" + commitName, "GIT_AUTHOR_EMAIL=" + commitEmail,
		"GIT_COMMITTER_NAME=" + commitName, "GIT_COMMITTER_EMAIL=" + commitEmail,
	}
}

// Workspace is a run's worktree on this node.
type Workspace struct {
	Dir   string // the worktree: the child's cwd
	Cache string // the bare cache repository it belongs to
}

// Pushed is what Finish pushed.
type Pushed struct {
	Head     string // the branch's commit on the remote
	DiffStat *protocol.DiffStats
}

// Errors of Git, matched with errors.Is.
var (
	// ErrBadPlace: the run's remote, base or branch is not one git may
	// be given (an option-like remote, a base that is no commit id, a
	// branch name git refuses).
	ErrBadPlace = errors.New("runner: bad git place")
	// ErrBaseMissing: the base commit is not on the remote's branch.
	ErrBaseMissing = errors.New("runner: the base commit is not on the remote")
)

var commitID = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// run runs one git in dir.
func (g *Git) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	r := g.Runner
	if r == nil {
		r = &git.Exec{Env: Env()}
	}
	return r.Run(ctx, git.Invocation{Dir: dir, Args: args})
}

// check refuses a place git must not be handed.
func check(p *records.RunGit) error {
	switch {
	case p == nil:
		return fmt.Errorf("%w: none", ErrBadPlace)
	case p.Remote == "" || strings.HasPrefix(p.Remote, "-"):
		return fmt.Errorf("%w: remote %q", ErrBadPlace, p.Remote)
	case !commitID.MatchString(p.Base):
		return fmt.Errorf("%w: base %q is not a commit id", ErrBadPlace, p.Base)
	case p.Branch == "" || strings.HasPrefix(p.Branch, "-") || strings.HasPrefix(p.Branch, "refs/"):
		return fmt.Errorf("%w: branch %q", ErrBadPlace, p.Branch)
	}
	return nil
}

// cacheOf is the cache repository of a remote.
func (g *Git) cacheOf(remote string) string {
	sum := sha256.Sum256([]byte(remote))
	return filepath.Join(g.Root, "repos", hex.EncodeToString(sum[:12])+".git")
}

// WorktreeOf is where a run's worktree is on this node.
func (g *Git) WorktreeOf(runID string) string {
	return filepath.Join(g.Root, "worktrees", runID)
}

// mkdirs makes Root and its two directories, owner-only.
func (g *Git) mkdirs() error {
	for _, d := range []string{g.Root, filepath.Join(g.Root, "repos"), filepath.Join(g.Root, "worktrees")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Prepare fetches the run's branch from its remote into the cache and
// makes the run's worktree on that branch at its base commit.
func (g *Git) Prepare(ctx context.Context, run records.RunRecord) (Workspace, error) {
	if err := check(run.Git); err != nil {
		return Workspace{}, err
	}
	if !validName(run.RunID) {
		return Workspace{}, fmt.Errorf("%w: run id %q", ErrBadPlace, run.RunID)
	}
	p := run.Git
	ws, _, unlock, err := g.fetched(ctx, p, run.RunID)
	if err != nil {
		return ws, err
	}
	defer unlock()
	if _, err := os.Stat(ws.Dir); err == nil {
		return ws, fmt.Errorf("runner: worktree %s exists already", ws.Dir)
	}
	if err := g.clone(ctx, ws, p, p.Base); err != nil {
		return ws, fmt.Errorf("runner: make worktree: %w", err)
	}
	g.used(ws.Cache)
	return ws, nil
}

// fetched locks the cache of p's remote, makes the cache if it is not
// there, and fetches p's branch into it (fetchBranch). It returns the
// work tree named name of that cache (not made here), the cache's ref of
// the branch, and the unlock, which the caller calls; on an error the
// cache is unlocked already.
func (g *Git) fetched(ctx context.Context, p *records.RunGit, name string) (ws Workspace, remoteRef string, unlock func(), err error) {
	if err := g.mkdirs(); err != nil {
		return Workspace{}, "", nil, fmt.Errorf("runner: make %s: %w", g.Root, err)
	}
	ws = Workspace{Dir: g.WorktreeOf(name), Cache: g.cacheOf(p.Remote)}
	unlock, err = g.locks.Lock(ctx, ws.Cache)
	if err != nil {
		return ws, "", nil, err
	}
	if err = g.makeCache(ctx, ws.Cache); err == nil {
		remoteRef, err = g.fetchBranch(ctx, ws.Cache, p)
	}
	if err != nil {
		unlock()
		return ws, "", nil, err
	}
	return ws, remoteRef, unlock, nil
}

// makeCache makes the bare cache repository when it is not there yet
// (under its lock).
func (g *Git) makeCache(ctx context.Context, cache string) error {
	if _, err := os.Stat(cache); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	tmp := cache + ".new"
	_ = os.RemoveAll(tmp)
	if _, err := g.run(ctx, filepath.Join(g.Root, "repos"), "init", "--bare", "--quiet", tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, cache); err != nil {
		return fmt.Errorf("runner: cache %s: %w", cache, err)
	}
	return nil
}

// fetchBranch fetches the run's branch from its remote into cache (under
// the cache's lock) and checks that the base is on it; it returns the
// cache's ref of the branch as the remote has it.
func (g *Git) fetchBranch(ctx context.Context, cache string, p *records.RunGit) (string, error) {
	if _, err := g.run(ctx, cache, "check-ref-format", "--branch", p.Branch); err != nil {
		return "", fmt.Errorf("%w: branch %q", ErrBadPlace, p.Branch)
	}
	// The runs' clones borrow the cache's objects (clone --shared): no
	// automatic gc may drop one of them, after a fetch or a Retire's push
	// into the cache. Set on every fetch, for caches an earlier build made.
	for _, kv := range [][2]string{{"gc.auto", "0"}, {"receive.autogc", "false"}} {
		if _, err := g.run(ctx, cache, "config", kv[0], kv[1]); err != nil {
			return "", fmt.Errorf("runner: configure the cache: %w", err)
		}
	}
	remoteRef := "refs/remotes/origin/" + p.Branch
	if _, err := g.run(ctx, cache, "fetch", "--quiet", "--no-tags", "--", p.Remote, "+refs/heads/"+p.Branch+":"+remoteRef); err != nil {
		return "", fmt.Errorf("runner: fetch branch %s: %w", p.Branch, err)
	}
	if _, err := g.run(ctx, cache, "merge-base", "--is-ancestor", p.Base, remoteRef); err != nil {
		return "", fmt.Errorf("%w: %s on %s: %w", ErrBaseMissing, p.Base, p.Branch, err)
	}
	return remoteRef, nil
}

// clone makes ws.Dir a clone of ws.Cache sharing its objects, its origin
// the remote, checked out on the run's branch at start (a commit the
// cache holds). A clone that cannot be finished is removed.
func (g *Git) clone(ctx context.Context, ws Workspace, p *records.RunGit, start string) error {
	if _, err := g.run(ctx, filepath.Join(g.Root, "worktrees"), "clone", "--quiet", "--shared", "--no-checkout", "--", ws.Cache, ws.Dir); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"remote", "set-url", "origin", p.Remote},
		{"checkout", "--quiet", "--no-track", "-B", p.Branch, start},
	} {
		if _, err := g.run(ctx, ws.Dir, args...); err != nil {
			_ = os.RemoveAll(ws.Dir)
			return err
		}
	}
	return nil
}

// ownClone reports whether dir is a clone made by clone from cache: its
// alternates name the cache's objects.
func ownClone(dir, cache string) bool {
	alt, err := os.ReadFile(filepath.Join(dir, ".git", "objects", "info", "alternates"))
	return err == nil && sameDir(strings.TrimSpace(string(alt)), filepath.Join(cache, "objects"))
}

// Resume makes ready the worktree a relaunched child goes on in (a run
// pinned to this node, records.RunRecord.Host; docs/protocol.md §13 "Runs
// on other nodes"). As on one node, where a relaunched isolated child
// keeps its workspace, its worktree and its branch, the child keeps the
// worktree its first run here made (Root/worktrees/<run.Worktree>, its
// cwd) and the run's branch: the branch is fetched from the remote and
// the worktree fast-forwarded to it (it is there already unless someone
// pushed the branch since). A worktree that is gone (released once its
// run's branch was pushed, or retired after an interruption) is made
// again at the same path, on the branch as this node's cache kept it when
// that descends from the remote's, else as the remote has it; a cache
// pruned meanwhile is made again too. The run's base stays the workspace's base, so its diff
// stat is the workspace's whole diff, as on one node.
func (g *Git) Resume(ctx context.Context, run records.RunRecord) (Workspace, error) {
	if err := check(run.Git); err != nil {
		return Workspace{}, err
	}
	if !validName(run.RunID) || !validName(run.Worktree) {
		return Workspace{}, fmt.Errorf("%w: run %q, worktree %q", ErrBadPlace, run.RunID, run.Worktree)
	}
	// The cache may have been pruned since the child's last run (Prune:
	// no worktree was left once that run's branch was pushed); the
	// branch is on the remote, so fetched makes it again.
	p := run.Git
	ws, remoteRef, unlock, err := g.fetched(ctx, p, run.Worktree)
	if err != nil {
		return ws, err
	}
	defer unlock()
	tip, err := g.run(ctx, ws.Cache, "rev-parse", "--verify", "--quiet", remoteRef+"^{commit}")
	if err != nil {
		return ws, fmt.Errorf("runner: branch %s: %w", p.Branch, err)
	}
	// The cache's objects are the clone's too: the tip needs no fetch.
	if ownClone(ws.Dir, ws.Cache) {
		if _, err := g.run(ctx, ws.Dir, "merge", "--ff-only", "--quiet", strings.TrimSpace(string(tip))); err != nil {
			return ws, fmt.Errorf("runner: bring the child's worktree to branch %s: %w", p.Branch, err)
		}
		g.used(ws.Cache)
		g.enter(ws.Dir)
		return ws, nil
	}
	listed, err := g.listed(ctx, ws.Cache, ws.Dir)
	if err != nil {
		return ws, err
	}
	if listed { // an earlier build's linked worktree: it shares the cache's refs
		if _, err := g.run(ctx, ws.Dir, "merge", "--ff-only", "--quiet", remoteRef); err != nil {
			return ws, fmt.Errorf("runner: bring the child's worktree to branch %s: %w", p.Branch, err)
		}
		g.enter(ws.Dir)
		return ws, nil
	}
	if _, err := os.Stat(ws.Dir); err == nil {
		return ws, fmt.Errorf("runner: %s is there but is no worktree of the run's cache", ws.Dir)
	}
	start := remoteRef
	if _, err := g.run(ctx, ws.Cache, "merge-base", "--is-ancestor", remoteRef, "refs/heads/"+p.Branch); err == nil {
		start = "refs/heads/" + p.Branch // what a retire committed here, kept
	}
	sha, err := g.run(ctx, ws.Cache, "rev-parse", "--verify", "--quiet", start+"^{commit}")
	if err != nil {
		return ws, fmt.Errorf("runner: branch %s: %w", p.Branch, err)
	}
	if err := g.clone(ctx, ws, p, strings.TrimSpace(string(sha))); err != nil {
		return ws, fmt.Errorf("runner: make worktree again: %w", err)
	}
	g.used(ws.Cache)
	g.enter(ws.Dir)
	return ws, nil
}

// enter counts a relaunch working in dir now (Resume, under the cache's
// lock).
func (g *Git) enter(dir string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resumed == nil {
		g.resumed = map[string]int{}
	}
	g.resumed[dir]++
}

// Leave says the relaunch Resume gave ws is done working in it (before
// its own Release). Until then a Release or Retire of an earlier run of
// the child, whose work tree it is, keeps it: a relaunch may begin here
// while the run before it is still being released.
func (g *Git) Leave(ws Workspace) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resumed[ws.Dir] <= 1 {
		delete(g.resumed, ws.Dir)
		return
	}
	g.resumed[ws.Dir]--
}

// inUse reports whether a relaunch works in dir now (Leave).
func (g *Git) inUse(dir string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.resumed[dir] > 0
}

// listed reports whether dir is one of the cache's worktrees.
func (g *Git) listed(ctx context.Context, cache, dir string) (bool, error) {
	out, err := g.run(ctx, cache, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return false, fmt.Errorf("runner: list the worktrees of %s: %w", cache, err)
	}
	for f := range strings.SplitSeq(string(out), "\x00") {
		if path, ok := strings.CutPrefix(f, "worktree "); ok && sameDir(path, dir) {
			return true, nil
		}
	}
	return false, nil
}

// Finish commits the worktree's changes (every file, .gitignore kept),
// pushes the branch to the remote and measures it against the base. A
// push the remote refuses (the branch moved there) is an error: the run
// fails rather than lose or overwrite work.
func (g *Git) Finish(ctx context.Context, run records.RunRecord, ws Workspace) (Pushed, error) {
	p := run.Git
	if err := check(p); err != nil {
		return Pushed{}, err
	}
	if _, err := g.commit(ctx, run, ws.Dir); err != nil {
		return Pushed{}, err
	}
	out, err := g.run(ctx, ws.Dir, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return Pushed{}, err
	}
	head := strings.TrimSpace(string(out))
	if _, err := g.run(ctx, ws.Dir, "-c", "core.hooksPath="+os.DevNull, "-c", "advice.pushUpdateRejected=false", "push", "--quiet", "--no-verify", "--",
		p.Remote, head+":refs/heads/"+p.Branch); err != nil {
		return Pushed{Head: ""}, err
	}
	stat, err := g.diffStat(ctx, ws.Dir, p.Base, head)
	if err != nil {
		return Pushed{Head: head}, nil // pushed; the stat is only a summary
	}
	return Pushed{Head: head, DiffStat: stat}, nil
}

// commit commits every change in the worktree dir (.gitignore kept)
// under Shard's identity, with no hook and no signature, and reports
// whether there was anything to commit.
func (g *Git) commit(ctx context.Context, run records.RunRecord, dir string) (bool, error) {
	if _, err := g.run(ctx, dir, "add", "--all"); err != nil {
		return false, fmt.Errorf("runner: stage the changes: %w", err)
	}
	if _, err := g.run(ctx, dir, "diff", "--cached", "--quiet"); err == nil {
		return false, nil
	} else if ge := (*git.Error)(nil); !errors.As(err, &ge) || ge.ExitCode != 1 {
		return false, fmt.Errorf("runner: look at the changes: %w", err)
	}
	msg := fmt.Sprintf("%s\n\nShard run %s of job %s, on node %s.\n",
		firstNonEmpty(run.Name, "shard run "+run.RunID), run.RunID, run.JobID, g.Node)
	if _, err := g.run(ctx, dir, "-c", "commit.gpgsign=false", "-c", "core.hooksPath="+os.DevNull,
		"commit", "--quiet", "--no-verify", "-m", msg); err != nil {
		return false, fmt.Errorf("runner: commit the changes: %w", err)
	}
	return true, nil
}

// diffStat sums `git diff --numstat base head` (a binary file counts as
// changed, with no lines).
func (g *Git) diffStat(ctx context.Context, dir, base, head string) (*protocol.DiffStats, error) {
	out, err := g.run(ctx, dir, "diff", "--numstat", "--no-renames", base, head)
	if err != nil {
		return nil, err
	}
	st := &protocol.DiffStats{}
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 {
			continue
		}
		st.Files++
		a, _ := strconv.Atoi(f[0])
		d, _ := strconv.Atoi(f[1])
		st.Additions += a
		st.Deletions += d
	}
	return st, nil
}

// Retire removes the worktree of a run that will not go on here (it was
// interrupted), when the worktree is provably this node's (own). Anything
// else is left alone. What the child changed is not lost: it is committed
// first onto the run's branch in the cache (not pushed: the run did not
// end, and its branch on the remote stays as the parent's node knows it).
// A work tree a relaunch of the child works in now (Resume) is its: left
// alone, with no error. It reports whether it removed the worktree.
func (g *Git) Retire(ctx context.Context, run records.RunRecord) (bool, error) {
	wt, unlock, err := g.own(ctx, run)
	if errors.Is(err, errInUse) {
		return false, nil // the relaunch goes on with what is there
	}
	if unlock == nil {
		return false, err
	}
	defer unlock()
	if _, err := g.commit(ctx, run, wt.dir); err != nil {
		return false, err
	}
	if !wt.linked {
		if _, err := g.run(ctx, wt.dir, "-c", "core.hooksPath="+os.DevNull, "push", "--quiet", "--force", "--no-verify", "--",
			wt.cache, "HEAD:refs/heads/"+run.Git.Branch); err != nil {
			return false, fmt.Errorf("runner: keep the run's work in the cache: %w", err)
		}
	}
	if err := g.remove(ctx, wt); err != nil {
		return false, err
	}
	return true, nil
}

// Release retires the worktree of a run that ended here and whose branch
// the remote took at head (Finish), once its terminal record is written:
// the work is on the remote, and the parent's node fetches it from there.
// It removes the worktree only when it is provably this node's (own) and
// holds nothing the push did not take: its HEAD is head and nothing is
// left to commit. Then the run's branch in the cache goes too: the copy
// its fetch made, and a Retire's earlier keeping of it if that is still
// at head. Anything else is kept,
// with an error saying why: unpushed work is never deleted. It reports
// whether it removed the worktree.
func (g *Git) Release(ctx context.Context, run records.RunRecord, head string) (bool, error) {
	if !commitID.MatchString(head) {
		return false, nil
	}
	wt, unlock, err := g.own(ctx, run)
	if unlock == nil {
		return false, err
	}
	defer unlock()
	out, err := g.run(ctx, wt.dir, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return false, err
	}
	if at := strings.TrimSpace(string(out)); at != head {
		return false, fmt.Errorf("runner: worktree %s is at %s, the remote took %s: kept", wt.dir, at, head)
	}
	if out, err := g.run(ctx, wt.dir, "status", "--porcelain", "--untracked-files=all"); err != nil {
		return false, err
	} else if len(strings.TrimSpace(string(out))) > 0 {
		return false, fmt.Errorf("runner: worktree %s has changes the push did not take: kept", wt.dir)
	}
	if err := g.remove(ctx, wt); err != nil {
		return false, err
	}
	g.used(wt.cache)
	// The fetch's copy of the branch goes: the branch is on the remote, a
	// later run of it fetches it again, and a cache in use every day
	// (never idle long enough for Prune) would otherwise keep every run's
	// branch and its objects.
	if _, err := g.run(ctx, wt.cache, "update-ref", "-d", "refs/remotes/origin/"+run.Git.Branch); err != nil {
		return true, fmt.Errorf("runner: the cache's copy of branch %s was kept: %w", run.Git.Branch, err)
	}
	ref := "refs/heads/" + run.Git.Branch
	if _, err := g.run(ctx, wt.cache, "rev-parse", "--verify", "--quiet", ref); err != nil {
		return true, nil // a clone's branch never was the cache's
	}
	// The branch only if it is still the pushed commit (update-ref checks).
	if _, err := g.run(ctx, wt.cache, "update-ref", "-d", ref, head); err != nil {
		return true, fmt.Errorf("runner: the cache's branch %s was kept: %w", run.Git.Branch, err)
	}
	return true, nil
}

// worktree is a run's work tree that own proved this node's.
type worktree struct {
	dir, cache string
	// linked: an earlier build's linked worktree of the cache, not a
	// clone of it.
	linked bool
}

// own locks the cache of a run whose worktree is provably this node's and
// returns it with the unlock: its path is under Root/worktrees (the run's
// own, or for a relaunch its child's, records.RunRecord.Worktree) and it
// is a clone sharing the run's cache's objects (its alternates name
// them), or a linked worktree the cache lists (an earlier build's), and
// no relaunch works in it now (errInUse: Resume, until Leave). For any
// other run, unlock is nil (with the error, if the cache could not be
// read).
func (g *Git) own(ctx context.Context, run records.RunRecord) (worktree, func(), error) {
	name := run.RunID
	if run.Host != "" {
		name = run.Worktree // a relaunch ran in its child's worktree
	}
	if check(run.Git) != nil || !validName(name) {
		return worktree{}, nil, nil
	}
	wt := worktree{dir: g.WorktreeOf(name), cache: g.cacheOf(run.Git.Remote)}
	unlock, err := g.locks.Lock(ctx, wt.cache)
	if err != nil {
		return worktree{}, nil, err
	}
	if _, err := os.Stat(wt.cache); err != nil {
		unlock()
		return worktree{}, nil, nil // no cache: nothing of ours
	}
	if g.inUse(wt.dir) {
		unlock()
		return worktree{}, nil, errInUse
	}
	if ownClone(wt.dir, wt.cache) {
		return wt, unlock, nil
	}
	listed, err := g.listed(ctx, wt.cache, wt.dir)
	if !listed || err != nil {
		unlock()
		return worktree{}, nil, err
	}
	wt.linked = true
	return wt, unlock, nil
}

// errInUse: a relaunch of the child works in the work tree now (Resume,
// until Leave); it is kept for it.
var errInUse = errors.New("runner: a relaunch of the child works in the worktree now: kept")

// remove removes a worktree own proved this node's.
func (g *Git) remove(ctx context.Context, wt worktree) error {
	if wt.linked {
		_, err := g.run(ctx, wt.cache, "worktree", "remove", "--force", "--force", wt.dir)
		return err
	}
	if err := os.RemoveAll(wt.dir); err != nil {
		return fmt.Errorf("runner: remove the worktree: %w", err)
	}
	return nil
}

// usedStamp is a file in a cache repository whose modification time is
// the last time a run used the cache (made or released a worktree of it):
// Prune's clock. git ignores a file of this name in a repository.
const usedStamp = "shard-last-used"

// used stamps a cache as used now (under its lock). A stamp that cannot
// be written only makes the cache look older, and Prune still keeps a
// cache with a worktree or a branch.
func (g *Git) used(cache string) {
	p := filepath.Join(cache, usedStamp)
	if err := os.WriteFile(p, nil, 0o600); err == nil {
		now := time.Now()
		_ = os.Chtimes(p, now, now)
	}
}

// DefaultCacheIdle is how long a cache repository no run used is kept
// (Runner prunes older ones): a repository is fetched again, whole, by
// the next run of it after its cache went, so only caches nobody used for
// a week go.
const DefaultCacheIdle = 7 * 24 * time.Hour

// Prune removes the cache repositories no run used for idle before now
// and that hold nothing of a run: no work tree (a live run's, or one kept
// because its push failed; a clone's objects are the cache's) and no
// branch (an interrupted run's work, committed there by Retire and never
// pushed). It returns the caches it removed. A cache it cannot read is
// kept.
func (g *Git) Prune(ctx context.Context, idle time.Duration, now time.Time) ([]string, error) {
	dirs, err := os.ReadDir(filepath.Join(g.Root, "repos"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, d := range dirs {
		if !d.IsDir() || !strings.HasSuffix(d.Name(), ".git") {
			continue
		}
		cache := filepath.Join(g.Root, "repos", d.Name())
		gone, err := g.pruneOne(ctx, cache, idle, now)
		if err != nil {
			return removed, err
		}
		if gone {
			removed = append(removed, cache)
		}
	}
	return removed, nil
}

// pruneOne is Prune of one cache, under its lock.
func (g *Git) pruneOne(ctx context.Context, cache string, idle time.Duration, now time.Time) (bool, error) {
	unlock, err := g.locks.Lock(ctx, cache)
	if err != nil {
		return false, err
	}
	defer unlock()
	fi, err := os.Stat(filepath.Join(cache, usedStamp))
	if errors.Is(err, os.ErrNotExist) {
		fi, err = os.Stat(cache) // made before stamps: its own time
	}
	if err != nil {
		return false, nil
	}
	if now.Sub(fi.ModTime()) < idle {
		return false, nil
	}
	if g.cloned(cache) {
		return false, nil
	}
	// Linked worktrees whose directories are gone do not count.
	if _, err := g.run(ctx, cache, "worktree", "prune"); err != nil {
		return false, nil
	}
	out, err := g.run(ctx, cache, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return false, nil
	}
	n := 0
	for f := range strings.SplitSeq(string(out), "\x00") {
		if strings.HasPrefix(f, "worktree ") {
			n++
		}
	}
	if n > 1 {
		return false, nil // the bare repository itself is the first
	}
	out, err = g.run(ctx, cache, "for-each-ref", "--format=%(refname)", "refs/heads/")
	if err != nil || strings.TrimSpace(string(out)) != "" {
		return false, nil
	}
	if err := os.RemoveAll(cache); err != nil {
		return false, fmt.Errorf("runner: remove the cache %s: %w", cache, err)
	}
	return true, nil
}

// cloned reports whether a work tree under Root/worktrees is a clone of
// cache (its objects are the cache's), or cannot be read (kept, then).
func (g *Git) cloned(cache string) bool {
	dirs, err := os.ReadDir(filepath.Join(g.Root, "worktrees"))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	for _, d := range dirs {
		if d.IsDir() && ownClone(filepath.Join(g.Root, "worktrees", d.Name()), cache) {
			return true
		}
	}
	return false
}

// sameDir reports whether two paths name one directory (symbolic links
// resolved, as git may have stored either form).
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// validName is an id a path may be made of: the record layer's token.
var validName = regexp.MustCompile(`^[A-Za-z0-9_=-]+$`).MatchString

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
