//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/spf13/pflag"

	"github.com/shard-dev/shard/config"
)

func TestHelpListsEveryFlag(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(sharddBin, "--help")
	cmd.Env = sharddEnv(newHome(t))
	r := runCmd(t, cmd, "")
	if r.code != 0 {
		t.Fatalf("shardd --help exited %d; stderr:\n%s", r.code, r.stderr)
	}

	// Every flag the config registers, however it grows.
	fs := pflag.NewFlagSet("shardd", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	// A few named explicitly, so the test still means something should
	// RegisterFlags itself lose flags.
	for _, want := range []string{
		"home", "config", "log-level", "log.level", "web-host", "web-port",
		"kill.abort-grace", "kill.term-grace", "runtime.idle-timeout",
		"gateway.ticket-ttl", "headless.policy", "store.lock-timeout", "store.no-sync",
	} {
		if fs.Lookup(want) == nil {
			t.Errorf("config.RegisterFlags does not define --%s", want)
		}
	}
	for _, name := range names {
		// The flag as a whole word: --web.port must not pass for --web-port.
		re := regexp.MustCompile(`(?m)(^|\s)--` + regexp.QuoteMeta(name) + `([\s=\[]|$)`)
		if !re.MatchString(r.stdout) {
			t.Errorf("shardd --help does not list --%s", name)
		}
	}
	if t.Failed() {
		t.Logf("shardd --help:\n%s", r.stdout)
	}
}

func TestBadConfigStopsStartup(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		file string   // config.yaml content; "" for none
		env  []string // extra environment
		key  string   // the setting the error must name
	}{
		{name: "unknown key", file: "kill: {abort_grce: 5s}\n", key: "kill.abort_grce"},
		{name: "bad file value", file: "web: {port: abc}\n", key: "web.port"},
		{name: "bad env value", env: []string{"SHARD_KILL_ABORT_GRACE=5parsecs"}, key: "kill.abort_grace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home := newHome(t)
			if err := os.MkdirAll(home, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(sharddBin, "--web-port", "0", "--store.no-sync")
			cmd.Env = sharddEnv(home, tc.env...)
			r := runCmd(t, cmd, "")
			if r.code <= 0 {
				t.Fatalf("shardd with a bad config exited %d, want a non-zero status; stderr:\n%s", r.code, r.stderr)
			}
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(tc.key) + `\b`).MatchString(r.stderr) {
				t.Errorf("stderr does not name %s:\n%s", tc.key, r.stderr)
			}
			for _, name := range []string{"daemon.sock", "daemon.json"} {
				if exists(t, filepath.Join(home, name)) {
					t.Errorf("%s left behind by a failed start", name)
				}
			}
			if pids := procsWithEnv(t, "SHARD_HOME="+home); len(pids) != 0 {
				t.Errorf("processes still running on %s after a failed start: %v", home, pids)
			}
		})
	}
}
