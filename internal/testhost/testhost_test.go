package testhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// recorder stands in for the test a helper ends: it records the skip or
// the failure instead of stopping the goroutine.
type recorder struct {
	testing.TB
	name          string
	skipped, fail string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Name() string                      { return r.name }
func (r *recorder) Skip(args ...any)                  { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.fail = fmt.Sprintf(format, args...) }

// setup points the skip log at a fresh file and sets strict mode as asked;
// it returns the log's path.
func setup(t *testing.T, strict bool) string {
	log := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipLogEnv, log)
	if strict {
		t.Setenv(StrictEnv, "1")
	} else {
		t.Setenv(StrictEnv, "")
	}
	return log
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestMissingSkipsAndLogs: outside strict mode a missing tool is a skip
// naming the tool and its installer, and the skip log gets one line.
func TestMissingSkipsAndLogs(t *testing.T) {
	log := setup(t, false)
	r := &recorder{name: "TestX/sub"}
	Missing(r, "git", "")
	want := "git is missing: .ci/run installs it (apt-get install git)"
	if r.skipped != want || r.fail != "" {
		t.Fatalf("skipped %q, failed %q; want the skip %q", r.skipped, r.fail, want)
	}
	if got := readLog(t, log); got != "internal/testhost TestX/sub: "+want+"\n" {
		t.Fatalf("skip log %q", got)
	}
}

// TestMissingFailsInStrictMode: in strict mode the same message fails the
// test, and nothing is logged as skipped.
func TestMissingFailsInStrictMode(t *testing.T) {
	log := setup(t, true)
	r := &recorder{name: "TestX"}
	Missing(r, "pi", "no .cache/agents/pi")
	if r.skipped != "" || !strings.HasPrefix(r.fail, "pi is missing (no .cache/agents/pi): scripts/install-agents.sh installs it") ||
		!strings.Contains(r.fail, StrictEnv+"=1") {
		t.Fatalf("skipped %q, failed %q; want a failure naming pi and its script", r.skipped, r.fail)
	}
	if got := readLog(t, log); got != "" {
		t.Fatalf("skip log %q; want nothing", got)
	}
}

// TestSkipIsASkipInStrictMode: a skip that is not about the machine stays
// a skip in strict mode, and is logged (a multi-line reason on one line).
func TestSkipIsASkipInStrictMode(t *testing.T) {
	log := setup(t, true)
	r := &recorder{name: "TestSoak"}
	Skip(r, "runs only with -soak\n  <duration>")
	if r.skipped == "" || r.fail != "" {
		t.Fatalf("skipped %q, failed %q", r.skipped, r.fail)
	}
	if got := readLog(t, log); got != "internal/testhost TestSoak: runs only with -soak <duration>\n" {
		t.Fatalf("skip log %q", got)
	}
}

// TestTool: a program in PATH is found; one that is not is Missing.
func TestTool(t *testing.T) {
	setup(t, false)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "shard-fake-tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	r := &recorder{name: "TestX"}
	if got := Tool(r, "shard-fake-tool"); got != filepath.Join(bin, "shard-fake-tool") || r.skipped != "" {
		t.Fatalf("Tool = %q (skipped %q)", got, r.skipped)
	}
	Tool(r, "shard-no-such-tool")
	if r.skipped != "shard-no-such-tool is missing: install it" {
		t.Fatalf("skipped %q", r.skipped)
	}
}

// TestIsolateHome: HOME and the XDG directories point into a new empty
// directory, and the Go toolchain's settings keep their values.
func TestIsolateHome(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		Missing(t, "go", "")
	}
	names := []string{"HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "GIT_CONFIG_NOSYSTEM",
		"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"}
	for _, k := range names { // restored when the test ends
		t.Setenv(k, os.Getenv(k))
	}
	before, err := goEnv()
	if err != nil {
		t.Fatal(err)
	}
	remove, err := IsolateHome()
	if err != nil {
		t.Fatal(err)
	}
	home := os.Getenv("HOME")
	entries, err := os.ReadDir(home)
	if err != nil || len(entries) != 0 {
		t.Fatalf("HOME %s: %v entries, %v; want an empty directory", home, entries, err)
	}
	if got := os.Getenv("XDG_CONFIG_HOME"); got != filepath.Join(home, ".config") {
		t.Errorf("XDG_CONFIG_HOME = %q", got)
	}
	if os.Getenv("GIT_CONFIG_NOSYSTEM") != "1" {
		t.Errorf("GIT_CONFIG_NOSYSTEM not set")
	}
	for _, kv := range before {
		k, v, _ := strings.Cut(kv, "=")
		if got := os.Getenv(k); got != v {
			t.Errorf("%s = %q after IsolateHome; want it pinned to %q", k, got, v)
		}
	}
	remove()
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("home not removed: %v", err)
	}
}

// runFunc is a Runner.
type runFunc func() int

func (f runFunc) Run() int { return f() }

// TestWithHome: the tests run under a home of their own, removed after;
// their exit code is passed on.
func TestWithHome(t *testing.T) {
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "GIT_CONFIG_NOSYSTEM",
		"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"} {
		t.Setenv(k, os.Getenv(k))
	}
	outer := os.Getenv("HOME")
	var inner string
	code := WithHome(runFunc(func() int { inner = os.Getenv("HOME"); return 7 })).Run()
	if code != 7 || inner == "" || inner == outer {
		t.Fatalf("Run = %d with HOME %q (outer %q); want 7 under a new home", code, inner, outer)
	}
	if _, err := os.Stat(inner); !os.IsNotExist(err) {
		t.Errorf("home not removed: %v", err)
	}
}
