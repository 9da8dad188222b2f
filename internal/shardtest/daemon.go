//go:build linux

package shardtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/promtext"
)

// PollInterval is how often the waits here look again. They bound waits
// that normally end in milliseconds; callers pass generous timeouts because
// the machine may be busy.
const PollInterval = 20 * time.Millisecond

// LeftoverBound bounds how long Reap waits for the processes it killed.
const LeftoverBound = 5 * time.Second

// DaemonOptions configure one shardd run.
type DaemonOptions struct {
	// Shardd is the shardd binary. Required.
	Shardd string
	// Home is the Shard home (SHARD_HOME); it need not exist yet. Required.
	Home string
	// Args are shardd's flags, e.g. --web-port 0 --store.no-sync.
	Args []string
	// Env is added after CleanEnv and SHARD_HOME=Home.
	Env []string
	// Stdout and Stderr receive shardd's output. Default: discarded.
	Stdout, Stderr io.Writer
}

// Daemon is one shardd subprocess on a home.
type Daemon struct {
	Home string
	*Proc
}

// StartDaemon starts shardd as o says and returns at once; WaitReady waits
// until it serves.
func StartDaemon(o DaemonOptions) (*Daemon, error) {
	if o.Shardd == "" || o.Home == "" {
		return nil, errors.New("shardtest: StartDaemon needs Shardd and Home")
	}
	cmd := exec.Command(o.Shardd, o.Args...)
	cmd.Env = CleanEnv(append([]string{"SHARD_HOME=" + o.Home}, o.Env...)...)
	cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
	p, err := StartProc(cmd)
	if err != nil {
		return nil, err
	}
	return &Daemon{Home: o.Home, Proc: p}, nil
}

// Socket is the daemon's unix socket.
func (d *Daemon) Socket() string { return filepath.Join(d.Home, "daemon.sock") }

// Discovery is daemon.json, which names the listeners.
func (d *Daemon) Discovery() string { return filepath.Join(d.Home, "daemon.json") }

// LogDir is the directory of shardd.log.
func (d *Daemon) LogDir() string { return filepath.Join(d.Home, "logs") }

// LogPath is shardd.log.
func (d *Daemon) LogPath() string { return filepath.Join(d.LogDir(), "shardd.log") }

// HomeEnv is the environment entry that marks the processes of the home.
func (d *Daemon) HomeEnv() string { return "SHARD_HOME=" + d.Home }

// errExited says the daemon ended while a wait expected it to serve.
var errExited = errors.New("shardtest: shardd exited before accepting clients")

// WaitReady polls the socket until a client completes the hello handshake,
// for up to timeout. It fails at once when shardd exits meanwhile (the
// error wraps errExited and gives the exit state).
func (d *Daemon) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if d.Exited() {
			return fmt.Errorf("%w: %v", errExited, d.State())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := client.Dial(ctx, d.Socket())
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shardtest: shardd not accepting on %s after %s: %w", d.Socket(), timeout, err)
		}
		time.Sleep(PollInterval)
	}
}

// WaitDiscovery waits up to timeout until daemon.json names the web
// listener (it is written right after the listeners).
func (d *Daemon) WaitDiscovery(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := d.WebURL()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shardtest: daemon.json not written after %s: %w", timeout, err)
		}
		time.Sleep(PollInterval)
	}
}

// WebURL is the web listener's base URL from daemon.json.
func (d *Daemon) WebURL() (string, error) {
	b, err := os.ReadFile(d.Discovery())
	if err != nil {
		return "", fmt.Errorf("shardtest: %w", err)
	}
	var disc struct {
		WebURL string `json:"web_url"`
	}
	if err := json.Unmarshal(b, &disc); err != nil {
		return "", fmt.Errorf("shardtest: decode daemon.json: %w", err)
	}
	if disc.WebURL == "" {
		return "", errors.New("shardtest: daemon.json has no web_url")
	}
	return disc.WebURL, nil
}

// Reap kills the daemon if it still runs, then whatever still runs with its
// SHARD_HOME (a runtime orphaned by a killed daemon, a stray shardctl), and
// waits up to LeftoverBound for them. It returns the leftover pids it found.
func (d *Daemon) Reap() []int {
	d.Kill()
	return KillEnv(d.HomeEnv(), LeftoverBound)
}

// Metrics scrapes the daemon's /metrics (the web URL from daemon.json),
// bounded by timeout, into sample name (labels included:
// `shard_agents_by_runtime_state{runtime_state="stopped"}`) → value.
func (d *Daemon) Metrics(timeout time.Duration) (map[string]float64, error) {
	base, err := d.WebURL()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("shardtest: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("shardtest: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return promtext.Samples(resp.Body)
}

// Log returns shardd.log, cut to its last max bytes when max > 0.
func (d *Daemon) Log(max int) (string, error) {
	b, err := os.ReadFile(d.LogPath())
	if err != nil {
		return "", fmt.Errorf("shardtest: %w", err)
	}
	return Tail(string(b), max), nil
}
