package workspaces_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces"
)

// send forwards cmd as the registry would, without waiting for an answer
// (a command stopped by a failpoint gets none).
func (h *harness) send(cmd protocol.Command) {
	h.t.Helper()
	raw := protocol.MustMarshal(cmd)
	var hdr protocol.Header
	if err := json.Unmarshal(raw, &hdr); err != nil {
		h.t.Fatal(err)
	}
	hdr.ID = "crash"
	h.sys.Root.Send(h.ws, &registry.Command{Client: h.client, Header: hdr, Cmd: cmd, Raw: raw})
}

// crashAt returns a Deps hook that stops the command's goroutine at step
// as a SIGKILL would (no later step, no rollback, no answer) after calling
// before, and the channel closed when it did.
func crashAt(step workspaces.Step, copyFiles []string, before func()) (func(*workspaces.Deps), chan struct{}) {
	crashed := make(chan struct{})
	return func(d *workspaces.Deps) {
		d.CopyFiles = copyFiles
		d.Failpoint = func(s workspaces.Step) {
			if s != step {
				return
			}
			if before != nil {
				before()
			}
			close(crashed)
			runtime.Goexit()
		}
	}, crashed
}

func waitCrash(t *testing.T, crashed chan struct{}, step workspaces.Step) {
	t.Helper()
	select {
	case <-crashed:
	case <-time.After(60 * time.Second):
		t.Fatalf("the command never reached %s", step)
	}
}

// gitLines runs git in dir and returns its output's non-empty lines.
func gitLines(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(gitIn(t, dir, args...), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// checkSettled asserts what a crash may never leave once startup
// reconciliation ran: no record mid-operation, no record pointing at a
// worktree that is not there (or not on its branch), no worktree under the
// root that no record holds, and no branch of ours that neither a live
// record nor a tombstone that kept it accounts for. It returns the records.
func checkSettled(t *testing.T, st *store.Store, repo, root string) []store.Workspace {
	t.Helper()
	all, err := st.ListWorkspaces(store.WorkspaceFilter{IncludeRetired: true})
	if err != nil {
		t.Fatal(err)
	}
	// git worktree list --porcelain: "worktree <path>" then "branch refs/heads/<b>".
	onDisk := map[string]string{}
	var cur string
	for _, l := range gitLines(t, repo, "worktree", "list", "--porcelain") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			cur = p
			onDisk[cur] = ""
		} else if b, ok := strings.CutPrefix(l, "branch refs/heads/"); ok {
			onDisk[cur] = b
		}
	}
	branches := map[string]bool{}
	for _, b := range gitLines(t, repo, "branch", "--format=%(refname:short)") {
		branches[b] = true
	}
	held := map[string]bool{}
	accounted := map[string]bool{}
	for _, r := range all {
		switch r.State {
		case protocol.WorkspaceStateCreating, protocol.WorkspaceStateRetiring:
			t.Fatalf("%s left %s by reconciliation", r.WorkspaceID, r.State)
		case protocol.WorkspaceStateActive, protocol.WorkspaceStateConflict:
			if b, ok := onDisk[r.WorktreePath]; !ok || b != r.Branch {
				t.Fatalf("%s (%s) points at %s on %s, git has %q (%v)", r.WorkspaceID, r.State, r.WorktreePath, r.Branch, b, ok)
			}
			if !branches[r.Branch] {
				t.Fatalf("%s (%s) has no branch %s", r.WorkspaceID, r.State, r.Branch)
			}
			held[r.WorktreePath], accounted[r.Branch] = true, true
		case protocol.WorkspaceStateRetired:
			if r.Tombstone == nil || r.Tombstone.HeadSHA == "" {
				t.Fatalf("%s retired without a tombstone head", r.WorkspaceID)
			}
			// A retire's tombstone (it has a disposition) that kept the
			// branch must find it; a failed create's never made work.
			if !r.Tombstone.Deleted && r.Tombstone.Disposition != "" {
				if !branches[r.Tombstone.Branch] {
					t.Fatalf("%s kept branch %s, which is gone", r.WorkspaceID, r.Tombstone.Branch)
				}
				accounted[r.Tombstone.Branch] = true
			}
		}
	}
	for p := range onDisk {
		if strings.HasPrefix(p, root+string(filepath.Separator)) && !held[p] {
			t.Fatalf("worktree %s under the root has no live record (records %+v)", p, all)
		}
	}
	for b := range branches {
		if strings.HasPrefix(b, "shard/") && !accounted[b] {
			t.Fatalf("branch %s is accounted for by no record", b)
		}
	}
	return all
}

// TestCrashDuringCreate stops a create at every step, as a SIGKILL would,
// restarts the actor on the same store and checks that reconciliation
// settled it; whatever is left must then retire cleanly. One more case
// models a kill inside `git worktree add` after git wrote the branch.
func TestCrashDuringCreate(t *testing.T) {
	type kase struct {
		name   string
		step   workspaces.Step
		branch bool // make the branch at the step, as a half-done git would
	}
	cases := []kase{{name: "branch-only", step: workspaces.StepCreateRecorded, branch: true}}
	for _, s := range workspaces.CreateSteps() {
		cases = append(cases, kase{name: string(s), step: s})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			repo := newRepo(t)
			if err := os.WriteFile(filepath.Join(repo, ".env"), []byte("SECRET=1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			st := openStore(t)
			root := filepath.Join(t.TempDir(), "worktrees")
			var before func()
			if c.branch {
				before = func() {
					all, _ := st.ListWorkspaces(store.WorkspaceFilter{})
					for _, r := range all {
						cmd := exec.Command("git", "branch", r.Branch, r.BaseSHA)
						cmd.Dir = repo
						_ = cmd.Run()
					}
				}
			}
			hook, crashed := crashAt(c.step, []string{".env"}, before)
			h := startDeps(t, st, root, hook)
			h.send(&protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: repo, Label: "crash"})
			waitCrash(t, crashed, c.step)

			h2 := startDeps(t, st, root, func(d *workspaces.Deps) { d.CopyFiles = []string{".env"} })
			realRoot, _ := filepath.EvalSymlinks(root)
			for _, r := range checkSettled(t, st, repo, realRoot) {
				if !r.Live() {
					continue
				}
				// copy_files' .env is untracked dirt a retire refuses.
				if err := os.Remove(filepath.Join(r.WorktreePath, ".env")); err != nil {
					t.Fatal(err)
				}
				var res protocol.WorkspaceRetireData
				h2.ok(&protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire}, WorkspaceID: r.WorkspaceID,
					BranchDisposition: protocol.DispositionKeep}, &res)
			}
			checkSettled(t, st, repo, realRoot)
		})
	}
}

// TestCrashDuringRetire stops a retire at every step, for keep and for
// delete_confirmed of a branch holding a commit of its own, and for
// delete_if_merged of one merged into main (startup proves it again); after
// the restart the retire is finished or rolled back, and the commit is on
// the branch or, for a deletion, in the tombstone.
func TestCrashDuringRetire(t *testing.T) {
	for _, step := range workspaces.RetireSteps() {
		for _, disp := range []protocol.BranchDisposition{protocol.DispositionKeep, protocol.DispositionDeleteConfirmed, protocol.DispositionDeleteIfMerged} {
			t.Run(string(step)+"/"+string(disp), func(t *testing.T) {
				repo := newRepo(t)
				st := openStore(t)
				root := filepath.Join(t.TempDir(), "worktrees")
				hook, crashed := crashAt(step, nil, nil)
				h := startDeps(t, st, root, hook)
				d := h.create(repo, "work")
				gitIn(t, d.Workspace.Cwd, "commit", "-q", "--allow-empty", "-m", "work")
				work := gitIn(t, d.Workspace.Cwd, "rev-parse", "HEAD")
				if disp == protocol.DispositionDeleteIfMerged {
					gitIn(t, repo, "merge", "-q", "--ff-only", d.Workspace.Branch)
				}
				h.send(&protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire},
					WorkspaceID: d.Workspace.WorkspaceID, BranchDisposition: disp})
				waitCrash(t, crashed, step)

				startDeps(t, st, root, nil)
				realRoot, _ := filepath.EvalSymlinks(root)
				checkSettled(t, st, repo, realRoot)
				rec, err := st.GetWorkspace(d.Workspace.WorkspaceID)
				if err != nil {
					t.Fatal(err)
				}
				branchAt := ""
				if out := gitLines(t, repo, "branch", "--list", "--format=%(objectname)", d.Workspace.Branch); len(out) == 1 {
					branchAt = out[0]
				}
				switch {
				case step == workspaces.StepRetireRecorded:
					// git removed nothing: rolled back.
					if rec.State != protocol.WorkspaceStateActive || branchAt != work {
						t.Fatalf("after a crash before git ran: %s, branch at %q", rec.State, branchAt)
					}
				case rec.State != protocol.WorkspaceStateRetired || rec.Tombstone.HeadSHA != work:
					t.Fatalf("not finished: %+v", rec)
				case disp == protocol.DispositionKeep && (branchAt != work || rec.Tombstone.Deleted):
					t.Fatalf("keep lost the branch: at %q, tombstone %+v", branchAt, rec.Tombstone)
				case disp != protocol.DispositionKeep && (branchAt != "" || !rec.Tombstone.Deleted):
					t.Fatalf("%s not finished: at %q, tombstone %+v", disp, branchAt, rec.Tombstone)
				}
			})
		}
	}
}
