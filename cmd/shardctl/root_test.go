package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shard-dev/shard/protocol"
)

func TestUnreachableSocketExits3(t *testing.T) {
	path := filepath.Join(socketDir(t), "daemon.sock")
	r := runCtl(t, nil, path, "", "status")
	if r.code != exitUnreachable {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "is shardd running? (socket "+path+")") {
		t.Fatalf("stderr = %q", r.stderr)
	}
}

func TestSilentDaemonExits3(t *testing.T) {
	// A socket that accepts but never says hello.
	path := filepath.Join(socketDir(t), "daemon.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := runCtl(t, nil, "", "", "--socket", path, "--timeout", "100ms", "agents", "ls")
	if r.code != exitUnreachable {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestHomeFlagAndEnvPickTheSocket(t *testing.T) {
	d := statusDaemon(t)
	home := filepath.Dir(d.path)
	if r := runCtl(t, nil, "", "", "--home", home, "status"); r.code != 0 {
		t.Fatalf("--home: exit %d stderr %q", r.code, r.stderr)
	}
	t.Setenv("SHARD_HOME", home)
	if r := runCtl(t, nil, "", "", "status"); r.code != 0 {
		t.Fatalf("SHARD_HOME: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestProtocolErrorExits1(t *testing.T) {
	d := newFakeDaemon(t, func(c *daemonConn, h protocol.Header, _ []byte) {
		c.respondError(h, protocol.CodeInternal, "store is on fire")
	})
	for _, args := range [][]string{{"status"}, {"agents", "ls"}, {"shutdown"}} {
		r := runCtl(t, nil, d.path, "", args...)
		if r.code != exitFailed || r.stderr != "shardctl: INTERNAL_ERROR: store is on fire\n" || r.stdout != "" {
			t.Errorf("%v: exit %d stdout %q stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"},
		{"agents", "bogus"},
		{"status", "--bad-flag"},
		{"status", "extra"},
		{"status", "-o", "xml"},
		{"prompt", "agent-only"},
		{"attach"},
		{"jobs", "ls", "--state", "sleepy"},
		{"jobs", "ls", "--since", "yesterday"},
		{"jobs", "ls", "--limit", "-1"},
		{"jobs", "show"},
		{"jobs", "relaunch", "job-x"},
		{"jobs", "wait"},
		{"jobs", "wait", "--timeout", "soon", "job-x"},
		{"agents", "ls", "--state", "sleepy"},
		{"agents", "kill"},
		{"--offline", "status"},
		{"--offline", "jobs", "stop", "job-x"},
		{"completion", "tcsh"},
		{"--timeout", "soon", "status"},
		{"--timeout", "0s", "status"},
	} {
		r := runCtl(t, nil, "/nonexistent/daemon.sock", "", args...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d stderr %q", args, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stderr, "shardctl: ") || !strings.Contains(r.stderr, "--help") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
	}
}

func TestHelpDocumentsExitCodes(t *testing.T) {
	r := runCtl(t, nil, "", "", "--help")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	for _, want := range []string{"Exit codes:", "0    success", "1    the command failed", "2    usage error", "3    cannot reach the daemon"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestRunUsesArgs(t *testing.T) {
	d := statusDaemon(t)
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if code := run(ctx, []string{"--socket", d.path, "status", "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d stderr %q", code, errb.String())
	}
	if !strings.Contains(out.String(), `"pid": 4242`) {
		t.Fatalf("stdout = %q", out.String())
	}
}

// TestHelpHasNoBoolMarkers: help lists boolean flags plainly, without
// pflag's "[=true|false]".
func TestHelpHasNoBoolMarkers(t *testing.T) {
	r := runCtl(t, nil, "", "", "prompt", "--help")
	if r.code != 0 || strings.Contains(r.stdout, "[=true|false]") || !strings.Contains(r.stdout, "--no-wait ") {
		t.Fatalf("help:\n%s", r.stdout)
	}
}

// TestHelpCitesNoPrivateDocs: help speaks to the person at the terminal,
// who has no copy of the wire spec or of design notes: it says what it
// means in words, and cites neither by section or name.
func TestHelpCitesNoPrivateDocs(t *testing.T) {
	// The bracketed letters keep this pattern from matching itself when the
	// repository is searched for such citations.
	cite := regexp.MustCompile(`\bspec\b|§|[D]ESIGN|\b[i]ssue \d`)
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		texts := []string{cmd.Short, cmd.Long, cmd.Example}
		cmd.Flags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, s := range texts {
			if m := cite.FindString(s); m != "" {
				t.Errorf("%s: help cites %q: %q", cmd.CommandPath(), m, s)
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
}
