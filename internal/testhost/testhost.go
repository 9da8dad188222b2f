package testhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The environment variables the package reads. .ci/run sets both.
const (
	// StrictEnv, when set to anything but "" or "0", turns a missing tool
	// into a failure.
	StrictEnv = "SHARD_TEST_STRICT"
	// SkipLogEnv names the file every skip is appended to.
	SkipLogEnv = "SHARD_TEST_SKIPLOG"
)

// Strict reports whether a missing tool fails the test (StrictEnv).
func Strict() bool {
	v := os.Getenv(StrictEnv)
	return v != "" && v != "0"
}

// Tool returns the path of the program name, looked up in PATH. When it is
// missing the test skips, or fails in strict mode (see Missing).
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, "")
	}
	return p
}

// Missing ends the test because tool is not on this machine: a skip that
// names the tool and what installs it, or, in strict mode, a failure with
// the same message. detail, when not empty, says how the lookup failed.
func Missing(t testing.TB, tool, detail string) {
	t.Helper()
	msg := tool + " is missing"
	if detail != "" {
		msg += " (" + detail + ")"
	}
	msg += ": " + Installer(tool)
	if Strict() {
		t.Fatalf("%s [%s=1: a missing tool fails the test]", msg, StrictEnv)
		return
	}
	Skip(t, msg)
}

// Installer says what puts tool on the machine: the step of .ci/run, the
// script, or the base system.
func Installer(tool string) string {
	switch tool {
	case "git", "tmux", "chromium", "openssl":
		return ".ci/run installs it (apt-get install " + tool + ")"
	case "codex-acp", "pi", "claude-agent-acp", "mcp-server-filesystem", "mcp-server-everything", "acpx":
		return "scripts/install-agents.sh installs it into .cache/agents (.ci/run runs it)"
	case "sh", "sleep", "true":
		return "the base system has it (Debian: dash, coreutils)"
	case "bash":
		return "the base system has it (Debian: bash)"
	case "flock":
		return "the base system has it (Debian: util-linux)"
	case "/proc":
		return "the Linux kernel provides it (mount proc on /proc)"
	case "pseudo-terminals":
		return "the Linux kernel provides them (mount devpts on /dev/pts)"
	}
	return "install it"
}

// Skip skips the test for reason, in strict mode too, and records the
// skip in the skip log. It is for skips that are not about a missing tool:
// an opt-in run, -short, a test that needs root.
func Skip(t testing.TB, reason string) {
	t.Helper()
	logSkip(t.Name(), reason)
	t.Skip(reason)
}

// logSkip appends "<package dir> <test>: <reason>" to the skip log, when
// SkipLogEnv names one. A failure to write it is reported on stderr but
// does not change the test's outcome: the log is a summary, not a result.
func logSkip(test, reason string) {
	path := os.Getenv(SkipLogEnv)
	if path == "" {
		return
	}
	line := packageDir() + " " + test + ": " + strings.Join(strings.Fields(reason), " ") + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err == nil {
		_, err = f.WriteString(line) // one write: whole lines under O_APPEND
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testhost: skip log %s: %v\n", path, err)
	}
}

// packageDir is the test's package directory relative to the module root
// (go test runs a test binary in its package's directory), e.g.
// "internal/daemon"; the absolute directory when no go.mod is above it.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, wd); err == nil {
				return filepath.ToSlash(rel)
			}
			return wd
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd
		}
		dir = parent
	}
}
