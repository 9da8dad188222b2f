package main

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/config"
)

// TestBannerNamesTheDashboardAndEnroll: the first line keeps the socket
// and the WebSocket endpoint; the second gives the dashboard's URL and a
// sign-in command that works as printed.
func TestBannerNamesTheDashboardAndEnroll(t *testing.T) {
	for _, tc := range []struct {
		name, home, host, trust, browser string
		want                             []string
	}{
		{
			name: "default home", home: "/home/u/.shard", host: "127.0.0.1", browser: "http://127.0.0.1:7420",
			want: []string{
				"shardd " + version + " listening on /home/u/.shard/daemon.sock and http://127.0.0.1:7420/ws (home /home/u/.shard)",
				"dashboard: http://127.0.0.1:7420/ (sign a browser in with: shardctl web enroll)",
			},
		},
		{
			name: "another home", home: "/tmp/my home", host: "127.0.0.1", browser: "http://127.0.0.1:7420",
			want: []string{
				"shardd " + version + " listening on /tmp/my home/daemon.sock and http://127.0.0.1:7420/ws (home /tmp/my home)",
				"dashboard: http://127.0.0.1:7420/ (sign a browser in with: shardctl --home '/tmp/my home' web enroll)",
			},
		},
		{
			name: "remote", home: "/home/u/.shard", host: "0.0.0.0", browser: "https://shard.example.com",
			want: []string{
				"shardd " + version + " listening on /home/u/.shard/daemon.sock and http://127.0.0.1:7420/ws (home /home/u/.shard)",
				"dashboard: https://shard.example.com/ (sign a browser in with: shardctl web enroll, run on this machine)",
			},
		},
		{
			name: "behind a proxy", home: "/srv/shard", host: "127.0.0.1", trust: "loopback", browser: "https://shard.example.com",
			want: []string{
				"shardd " + version + " listening on /srv/shard/daemon.sock and http://127.0.0.1:7420/ws (home /srv/shard)",
				"dashboard: https://shard.example.com/ (sign a browser in with: shardctl --home /srv/shard web enroll, run on this machine)",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Home: tc.home}
			cfg.Web.Host, cfg.Web.TrustProxy = tc.host, tc.trust
			got := banner(cfg, "http://127.0.0.1:7420", tc.browser, "/home/u")
			if want := strings.Join(tc.want, "\n") + "\n"; got != want {
				t.Errorf("banner:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/home/u/.shard": "/home/u/.shard",
		"/tmp/a b":       "'/tmp/a b'",
		"/tmp/it's":      `'/tmp/it'\''s'`,
		"":               "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
