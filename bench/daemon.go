//go:build linux

package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/internal/shardtest"
	"github.com/shard-dev/shard/protocol"
)

const (
	readyTimeout = 20 * time.Second
	reqTimeout   = 30 * time.Second
)

// daemon is one shardd subprocess on its own temporary home
// (shardtest.Daemon), its stdout and stderr kept (the first MiB) in stderr.
type daemon struct {
	*shardtest.Daemon
	home   string
	stderr *shardtest.Buffer
}

// cleanEnv is the driver's environment without SHARD_* variables.
func cleanEnv(extra ...string) []string { return shardtest.CleanEnv(extra...) }

// tempDir makes a short temporary directory (unix socket paths are limited
// to 108 bytes) removed at cleanup.
func tempDir() (string, error) {
	dir, err := shardtest.TempDir("shb")
	if err != nil {
		return "", err
	}
	atCleanup(func() { os.RemoveAll(dir) })
	return dir, nil
}

// floodEnv keeps long floods measurable: with the sim's default context
// window, a flood of megabytes fills the context and the next turn compacts
// or fails instead of streaming.
var floodEnv = []string{"SHARD_COMPACTION_ENABLED=false", "SHARD_SIM_CONTEXT_WINDOW=1000000000"}

// startDaemon runs shardd on a fresh home with env added to its environment
// and waits until its socket completes a hello.
func startDaemon(o *options, env []string, extra ...string) (*daemon, error) {
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	return startDaemonAt(o, filepath.Join(dir, "home"), env, extra...)
}

// startDaemonAt is startDaemon on a given home, which may hold a store
// already (the history scenario fills one before the daemon starts).
func startDaemonAt(o *options, home string, env []string, extra ...string) (*daemon, error) {
	d, err := spawnDaemonAt(o, home, env, nil, extra...)
	if err != nil {
		return nil, err
	}
	if err := d.WaitReady(cmp.Or(o.readyTimeout, readyTimeout)); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, d.stderr.String())
	}
	return d, nil
}

// spawnDaemonAt starts shardd on home and returns at once (a cluster
// node serves only once a quorum of its cluster is up, so the cluster
// scenario starts every node before it waits for any). Its stderr is
// also copied to watch when set.
func spawnDaemonAt(o *options, home string, env []string, watch io.Writer, extra ...string) (*daemon, error) {
	args := []string{"--web-port", "0"}
	if o.noSync {
		args = append(args, "--store.no-sync")
	}
	args = append(args, strings.Fields(o.daemonArgs)...)
	args = append(args, extra...)
	if o.cpuprofile != "" {
		prof, err := filepath.Abs(profilePath(o.cpuprofile, o.profileTag))
		if err != nil {
			return nil, err
		}
		_ = os.Remove(prof) // a stale profile must not pass for this run's
		env = append(env, "SHARD_CPUPROFILE="+prof)
		o.profiles = append(o.profiles, profileRun{Tag: o.profileTag, Path: prof})
	}
	out := &shardtest.Buffer{Max: 1 << 20}
	var stderr io.Writer = out
	if watch != nil {
		stderr = io.MultiWriter(out, watch)
	}
	sd, err := shardtest.StartDaemon(shardtest.DaemonOptions{
		Shardd: o.shardd, Home: home, Args: args, Env: env, Stdout: out, Stderr: stderr,
	})
	if err != nil {
		return nil, err
	}
	d := &daemon{Daemon: sd, home: home, stderr: out}
	atCleanup(d.stop)
	return d, nil
}

func (d *daemon) socket() string { return d.Socket() }

// stopGrace bounds a graceful daemon stop before SIGKILL.
const stopGrace = 30 * time.Second

// stop ends the daemon (SIGTERM, then SIGKILL after stopGrace) and kills
// whatever still runs with its SHARD_HOME.
func (d *daemon) stop() {
	_ = d.shutdown()
	killEnv(d.HomeEnv())
}

// shutdown stops the daemon gracefully (SIGTERM: runtimes are stopped, a
// CPU profile is flushed) and waits for it to exit; past stopGrace it is
// killed. It returns an error unless the daemon exited cleanly (status 0),
// now or before.
func (d *daemon) shutdown() error { return d.Terminate(stopGrace) }

// pid is the daemon's process id.
func (d *daemon) pid() int { return d.PID() }

// rssKiB is the daemon's resident set (VmRSS), its runtime children
// excluded.
func (d *daemon) rssKiB() (int64, error) { return procRSSKiB(d.pid()) }

// procRSSKiB reads VmRSS from /proc/<pid>/status.
func procRSSKiB(pid int) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
			return strconv.ParseInt(kb, 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// childMem is the memory of the runtime children, summed, in KiB. RSS
// counts every resident page, the executable's pages shared by all the
// children included; PSS divides each shared page among its sharers, and
// USS (private clean + dirty) is what one more child adds.
type childMem struct {
	N                 int
	RSS, PSS, Private int64
}

// childrenMemKiB sums RSS, PSS and USS over the daemon's runtime children
// (/proc/<pid>/smaps_rollup).
func (d *daemon) childrenMemKiB() childMem {
	var m childMem
	for _, pid := range procsWithEnv("SHARD_HOME=" + d.home) {
		if pid == d.pid() {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
		if err != nil {
			continue
		}
		var one childMem
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			kb, _, _ := strings.Cut(strings.TrimSpace(v), " ")
			n, err := strconv.ParseInt(kb, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "Rss":
				one.RSS = n
			case "Pss":
				one.PSS = n
			case "Private_Clean", "Private_Dirty":
				one.Private += n
			}
		}
		f.Close()
		m.N++
		m.RSS += one.RSS
		m.PSS += one.PSS
		m.Private += one.Private
	}
	return m
}

// procCPU is the CPU time (user + system) a process has used so far, its
// exited threads included, from /proc/<pid>/stat (10 ms resolution).
func procCPU(pid int) (time.Duration, error) {
	st, err := procstat.Read(pid)
	if err != nil {
		return 0, err
	}
	const clkTck = 100 // USER_HZ, fixed at 100 on Linux
	return time.Duration(st.UTime+st.STime) * time.Second / clkTck, nil
}

// selfCPU is the driver's own CPU time (its clients included).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuSnap is the CPU time used so far by the daemon, its runtime children
// and the driver.
type cpuSnap struct{ daemon, children, driver time.Duration }

func (d *daemon) cpu() cpuSnap {
	s := cpuSnap{driver: selfCPU()}
	s.daemon, _ = procCPU(d.pid())
	for _, pid := range procsWithEnv("SHARD_HOME=" + d.home) {
		if pid != d.pid() {
			c, _ := procCPU(pid)
			s.children += c
		}
	}
	return s
}

// cpuUse is the CPU used between two snapshots over a wall time, as a
// share of one core.
type cpuUse struct {
	Daemon   float64 `json:"daemon_cores"`
	Children float64 `json:"runtimes_cores"`
	Driver   float64 `json:"driver_cores"`
}

func cpuBetween(a, b cpuSnap, wall time.Duration) cpuUse {
	w := wall.Seconds()
	return cpuUse{Daemon: (b.daemon - a.daemon).Seconds() / w, Children: (b.children - a.children).Seconds() / w,
		Driver: (b.driver - a.driver).Seconds() / w}
}

// loadAvg is the first field of /proc/loadavg: the machine's 1-minute
// load, which others' work on the same machine raises.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// memAvailableKiB is MemAvailable from /proc/meminfo.
func memAvailableKiB() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
			return strconv.ParseInt(kb, 10, 64)
		}
	}
	return 0, errors.New("no MemAvailable in /proc/meminfo")
}

// metrics scrapes the daemon's /metrics into sample name (labels included:
// `shard_agents_by_runtime_state{runtime_state="stopped"}`) → value.
func (d *daemon) metrics() (map[string]float64, error) { return d.Metrics(10 * time.Second) }

// ---- CPU profiles ----

// profileRun is one daemon's CPU profile (--cpuprofile).
type profileRun struct {
	Tag  string `json:"tag,omitempty"`
	Path string `json:"path"`
	Top  string `json:"-"` // go tool pprof -top head, once read
}

// profilePath is file with tag inserted before its extension
// (cpu.prof, c10-unix → cpu.c10-unix.prof); file itself for no tag.
func profilePath(file, tag string) string {
	if tag == "" {
		return file
	}
	ext := filepath.Ext(file)
	return strings.TrimSuffix(file, ext) + "." + tag + ext
}

// pprofTop is the head of `go tool pprof -top` for a profile: the header
// and the top nodes by flat time.
func pprofTop(bin, prof string, nodes int) (string, error) {
	args := []string{"tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", nodes)}
	if bin != "" {
		if _, err := os.Stat(bin); err == nil {
			args = append(args, bin)
		}
	}
	out, err := exec.Command("go", append(args, prof)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof %s: %w\n%s", prof, err, out)
	}
	return string(out), nil
}

// killEnv SIGKILLs every live process whose environment holds kv and waits
// (up to 5 s) until none is left.
func killEnv(kv string) { shardtest.KillEnv(kv, 5*time.Second) }

// procsWithEnv returns the live, non-zombie processes whose environment
// holds the exact entry kv.
func procsWithEnv(kv string) []int { return shardtest.ProcsWithEnv(kv) }

// dial connects a unix-socket client.
func (d *daemon) dial() (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		return nil, err
	}
	atCleanup(func() { c.Close() })
	return c, nil
}

// dialWS mints a ticket over ctl and connects a WebSocket client.
func (d *daemon) dialWS(ctl *client.Conn) (*client.Conn, error) {
	var tk protocol.WSTicketData
	if err := call(ctl, &protocol.WSTicket{Header: protocol.Header{Type: protocol.TypeWSTicket}}, &tk); err != nil {
		return nil, fmt.Errorf("ws.ticket: %w", err)
	}
	url := "ws" + strings.TrimPrefix(tk.URL, "http")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialWebSocket(ctx, url, tk.Ticket)
	if err != nil {
		return nil, err
	}
	atCleanup(func() { c.Close() })
	return c, nil
}

// call is Conn.Call bounded by reqTimeout.
func call(c *client.Conn, msg protocol.Typed, data any) error {
	ctx, cancel := context.WithTimeout(context.Background(), reqTimeout)
	defer cancel()
	return c.Call(ctx, msg, data)
}

// createAgent creates a sim agent in a fresh temporary cwd.
func createAgent(c *client.Conn) (string, error) {
	cwd, err := tempDir()
	if err != nil {
		return "", err
	}
	var data protocol.AgentCreateData
	if err := call(c, &protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: cwd}, &data); err != nil {
		return "", fmt.Errorf("agent.create: %w", err)
	}
	return data.AgentID, nil
}

// attachSync attaches c to agent id and waits for the sync that follows. It
// returns the sync and its record size. Other events received meanwhile are
// dropped; c's Events must not be read concurrently.
func attachSync(c *client.Conn, id string) (*protocol.Sync, int, error) {
	if err := call(c, &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}}, nil); err != nil {
		return nil, 0, fmt.Errorf("agent.attach: %w", err)
	}
	timeout := time.After(reqTimeout)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				return nil, 0, fmt.Errorf("connection ended waiting for sync: %v", c.Err())
			}
			if s, ok := ev.Msg.(*protocol.Sync); ok && s.AgentID == id {
				return s, len(ev.Raw), nil
			}
		case <-timeout:
			return nil, 0, fmt.Errorf("no sync within %s", reqTimeout)
		}
	}
}

// prompt sends a prompt to agent id and waits for its acknowledgement.
func prompt(c *client.Conn, id, msg string) error {
	return call(c, &protocol.Prompt{Header: protocol.Header{Type: protocol.TypePrompt, AgentID: id}, Message: msg}, nil)
}

// ---- statistics ----

// dist summarizes a latency sample.
type dist struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

func summarize(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) float64 {
		i := int(p*float64(len(s))+0.5) - 1
		i = max(0, min(i, len(s)-1))
		return ms(s[i])
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return dist{N: len(s), Min: ms(s[0]), P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999),
		Max: ms(s[len(s)-1]), Mean: ms(sum / time.Duration(len(s)))}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
