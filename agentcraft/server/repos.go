package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/shard-dev/shard/agentcraft/wire"
)

// gitTimeout bounds each git command the server runs.
const gitTimeout = 10 * time.Second

// execGit runs the git on PATH, without a terminal prompt.
func execGit(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// git runs one git command bounded by gitTimeout.
func (s *Server) git(ctx context.Context, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	out, err := s.cfg.Git(ctx, dir, args...)
	return strings.TrimSpace(string(out)), err
}

// loadRepos registers the configured repositories, then those of
// ReposFile, in order.
func (s *Server) loadRepos(ctx context.Context) error {
	paths := append([]string(nil), s.cfg.Repos...)
	if s.cfg.ReposFile != "" {
		b, err := os.ReadFile(s.cfg.ReposFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return fmt.Errorf("agentcraft server: read %s: %w", s.cfg.ReposFile, err)
		default:
			var list reposFile
			if err := json.Unmarshal(b, &list); err != nil {
				return fmt.Errorf("agentcraft server: read %s: %w", s.cfg.ReposFile, err)
			}
			paths = append(paths, list.Paths...)
		}
	}
	s.mu.Lock()
	for _, p := range paths {
		if p != "" {
			s.m.addRepo(filepath.Clean(p))
		}
	}
	s.mu.Unlock()
	return nil
}

// reposFile is ReposFile's content.
type reposFile struct {
	// Paths are the repo.add'ed checkouts, oldest first.
	Paths []string `json:"paths"`
}

// writeReposFile replaces ReposFile with paths, durably: a temporary file
// synced, renamed over it, and the directory synced.
func writeReposFile(file string, paths []string) error {
	b, err := json.MarshalIndent(reposFile{Paths: paths}, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".agentcraft-repos-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// refreshRepo reads a repository's branch, head and dirtiness from git
// and broadcasts its repo.upsert if they changed.
func (s *Server) refreshRepo(ctx context.Context, r *repoRec) {
	branch, err := s.git(ctx, r.path, "rev-parse", "--abbrev-ref", "HEAD")
	if err != nil {
		s.log.Warn("agentcraft: read repository", "repo", r.id, "err", err)
		return
	}
	head, _ := s.git(ctx, r.path, "rev-parse", "--short", "HEAD")
	status, err := s.git(ctx, r.path, "status", "--porcelain", "--untracked-files=no")
	s.mu.Lock()
	defer s.mu.Unlock()
	r.branch, r.head, r.dirty = branch, head, err == nil && status != ""
	s.broadcastLocked(s.changedLocked()...)
}

// repoAdd registers a checkout: the top of the git repository path is in,
// kept in ReposFile before it is acknowledged.
func (s *Server) repoAdd(m wire.RepoAdd) (map[string]any, error) {
	if !filepath.IsAbs(m.Path) {
		return nil, fmt.Errorf("repo.add: %s: %w (an absolute path is needed)", echo(m.Path), errNotARepo)
	}
	top, err := s.git(s.ctx, m.Path, "rev-parse", "--show-toplevel")
	if err != nil || top == "" {
		return nil, fmt.Errorf("repo.add: %s: %w", echo(m.Path), errNotARepo)
	}
	top = filepath.Clean(top)
	s.repoMu.Lock()
	defer s.repoMu.Unlock()
	s.mu.Lock()
	for _, r := range s.m.repos {
		if r.path == top {
			s.mu.Unlock()
			return map[string]any{"repoId": r.id}, nil
		}
	}
	s.mu.Unlock()
	if s.cfg.ReposFile != "" {
		var list reposFile
		if b, err := os.ReadFile(s.cfg.ReposFile); err == nil {
			_ = json.Unmarshal(b, &list)
		}
		if err := writeReposFile(s.cfg.ReposFile, append(list.Paths, top)); err != nil {
			return nil, fmt.Errorf("repo.add: keep %q: %w", top, err)
		}
	}
	s.mu.Lock()
	r, _ := s.m.addRepo(top)
	s.mu.Unlock()
	s.refreshRepo(s.ctx, r)
	return map[string]any{"repoId": r.id}, nil
}
