package testhost

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// IsolateHome points HOME at a new empty directory for the rest of the
// test binary, and with it the XDG base directories (git reads
// $XDG_CONFIG_HOME/git/config; Chromium keeps its state there); git reads
// no system configuration either (GIT_CONFIG_NOSYSTEM=1). The Go
// toolchain's settings that default to places under HOME are pinned first
// to their current values (goEnv), so the builds tests run (shardd,
// shardctl) keep the warm caches: those are the toolchain's, not the
// product's.
//
// It sets the process's environment, so call it first in TestMain, before
// any test or goroutine runs. remove deletes the directory; call it after
// the tests.
func IsolateHome() (remove func(), err error) {
	pins, err := goEnv()
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "shard-test-home-")
	if err != nil {
		return nil, fmt.Errorf("testhost: %w", err)
	}
	env := append(pins,
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"GIT_CONFIG_NOSYSTEM=1",
	)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			os.RemoveAll(home)
			return nil, fmt.Errorf("testhost: set %s: %w", k, err)
		}
	}
	return func() { os.RemoveAll(home) }, nil
}

// goEnv returns GOCACHE, GOMODCACHE, GOPATH and GOENV as "NAME=value"
// entries, read with `go env` under the home the binary started with.
// Without a go command it returns none: nothing here can build then anyway.
func goEnv() ([]string, error) {
	names := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"}
	if _, err := exec.LookPath("go"); err != nil {
		return nil, nil
	}
	out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("testhost: go env: %w", err)
	}
	vals := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(vals) != len(names) {
		return nil, fmt.Errorf("testhost: go env printed %d lines for %d names", len(vals), len(names))
	}
	env := make([]string, 0, len(names))
	for i, name := range names {
		if len(vals[i]) > 0 {
			env = append(env, name+"="+string(vals[i]))
		}
	}
	return env, nil
}

// Runner is what a TestMain runs: *testing.M, or a wrapper of it.
type Runner interface{ Run() int }

// WithHome wraps m so that its tests run under IsolateHome: in a TestMain,
// os.Exit(testhost.WithHome(m).Run()), or goleak.VerifyTestMain(
// testhost.WithHome(m)). When the home cannot be made, Run says why on
// stderr and returns 1 without running the tests.
func WithHome(m Runner) Runner { return homeRunner{m} }

type homeRunner struct{ m Runner }

func (h homeRunner) Run() int {
	remove, err := IsolateHome()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	return h.m.Run()
}
