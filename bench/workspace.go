//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// workspaceResult is the workspace scenario's outcome.
type workspaceResult struct {
	Files   int  `json:"files"`
	Samples int  `json:"samples"`
	Create  dist `json:"create"`
	Retire  dist `json:"retire"`
}

// runWorkspace: a real git repository of --files files (default 10,000;
// quick 50) in one commit; --samples times (default 50; quick 5) a
// workspace.create (branch, worktree checkout of every file, records, the
// agent manifest) and then its workspace.retire with the default
// delete_if_merged (the untouched branch is proven same_commit and
// deleted, the worktree removed), each timed from request to response over
// the unix socket.
func runWorkspace(o *options) (*report, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("the workspace scenario needs git: %w", err)
	}
	files := pick(o.files, 10000, 50, o.quick)
	samples := pick(o.samples, 50, 5, o.quick)
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	repo := filepath.Join(dir, "repo")
	if err := makeRepo(repo, files); err != nil {
		return nil, err
	}
	d, err := startDaemon(o, nil)
	if err != nil {
		return nil, err
	}
	c, err := d.dial()
	if err != nil {
		return nil, err
	}
	go func() { // broadcasts (workspace_*) are not measured; keep c drained
		for range c.Events() {
		}
	}()
	var creates, retires []time.Duration
	for i := range samples {
		t0 := time.Now()
		var cd protocol.WorkspaceCreateData
		if err := call(c, &protocol.WorkspaceCreate{Header: protocol.Header{Type: protocol.TypeWorkspaceCreate}, Cwd: repo,
			Label: fmt.Sprintf("bench %d", i)}, &cd); err != nil {
			return nil, fmt.Errorf("workspace.create: %w", err)
		}
		creates = append(creates, time.Since(t0))
		t0 = time.Now()
		var rd protocol.WorkspaceRetireData
		if err := call(c, &protocol.WorkspaceRetire{Header: protocol.Header{Type: protocol.TypeWorkspaceRetire},
			WorkspaceID: cd.Workspace.WorkspaceID}, &rd); err != nil {
			return nil, fmt.Errorf("workspace.retire: %w", err)
		}
		retires = append(retires, time.Since(t0))
		if !rd.BranchDeleted {
			return nil, fmt.Errorf("workspace.retire kept the untouched branch %s", cd.Workspace.Branch)
		}
	}
	res := workspaceResult{Files: files, Samples: samples, Create: summarize(creates), Retire: summarize(retires)}
	rep := &report{Header: []string{"operation", "files", "samples", "p50 ms", "p99 ms", "max ms"}, Results: res}
	for _, row := range []struct {
		name string
		d    dist
	}{{"workspace.create", res.Create}, {"workspace.retire", res.Retire}} {
		rep.Rows = append(rep.Rows, []string{row.name, fmt.Sprint(files), fmt.Sprint(samples), f2(row.d.P50), f2(row.d.P99), f2(row.d.Max)})
	}
	rep.Notes = append(rep.Notes, "latency: request sent → response received on a unix-socket client; create checks out every file, retire (delete_if_merged) proves and deletes the branch and removes the worktree")
	return rep, nil
}

// makeRepo makes a git repository at dir with n small files spread over
// directories of 100, committed once on branch main.
func makeRepo(dir string, n int) error {
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			return err
		}
	}
	env := append(cleanEnv(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.test",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.test", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "files"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
