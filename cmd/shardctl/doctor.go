package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// Outcomes of a doctor check.
const (
	checkOK   = "ok"
	checkWarn = "warn" // worth knowing; not a failure (exit 0)
	checkFail = "fail" // a problem (exit 7)
	checkSkip = "skip" // could not be checked here
)

// doctorOptions are the options of shardctl doctor.
type doctorOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the doctor flags on cmd.
func (o *doctorOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newDoctorCommand(g *globalOptions) *cobra.Command {
	o := &doctorOptions{g: g}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the Shard home, the daemon and the database",
		Long: `Check a Shard home for problems, whether or not the daemon runs:

  home       the home directory exists, is yours and is owner-only (0700)
  config     config.yaml and the SHARD_* environment load as shardd would
             load them here (flags given to shardd are not known)
  daemon     the socket answers hello (not running is a warning)
  socket     the socket is yours and owner-only
  discovery  daemon.json names the running daemon (a stale one is a warning)
  database   shard.db is yours and owner-only
  store      bbolt consistency: daemon.check while the daemon runs, else a
             read-only check of the file
  orphans    no agent runtime of this home (a process with SHARD_HOME=<home>
             and SHARD_AGENT_ID) lives outside the daemon's process tree
  workspaces no record whose worktree or repository is missing, none stuck
             in creating or retiring, none in conflict, and no directory
             under the worktree root that looks like a worktree of ours but
             that no record holds (all warnings)

Each check is ok, warn, fail or skip; -o json|yaml prints {"home", "ok",
"checks":[{"name","status","detail"}]}. Exits 7 when a check failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// doctorCheck is the outcome of one check.
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// doctorReport is what doctor prints.
type doctorReport struct {
	Home   string        `json:"home"`
	OK     bool          `json:"ok"`
	Checks []doctorCheck `json:"checks"`
}

func (r *doctorReport) add(name, status, format string, args ...any) {
	r.Checks = append(r.Checks, doctorCheck{Name: name, Status: status, Detail: fmt.Sprintf(format, args...)})
}

func (o *doctorOptions) run(ctx context.Context, w io.Writer) error {
	home, err := o.g.homeDir()
	if err != nil {
		return err
	}
	home, _ = filepath.Abs(home)
	sock, err := o.g.socketPath()
	if err != nil {
		return err
	}
	r := &doctorReport{Home: home, Checks: []doctorCheck{}}
	o.checkHome(r, home)
	o.checkConfig(r, home)

	// The daemon, if it answers: what it reports drives later checks.
	var status *protocol.DaemonStatusData
	var conn *client.Conn
	_, sockErr := os.Lstat(sock)
	conn, err = o.g.connect(ctx)
	switch {
	case err == nil:
		defer conn.Close()
		go func() {
			for range conn.Events() {
			}
		}()
		var st protocol.DaemonStatusData
		if err := conn.Call(ctx, &protocol.DaemonStatus{Header: protocol.Header{Type: protocol.TypeDaemonStatus}}, &st); err != nil {
			r.add("daemon", checkFail, "answers on %s but daemon.status failed: %v", sock, err)
		} else {
			status = &st
			r.add("daemon", checkOK, "shardd %s (protocol %s), pid %d, up %s", st.Version, st.ProtocolVersion, st.PID, formatUptime(st.UptimeMs))
		}
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(sockErr, fs.ErrNotExist):
		r.add("daemon", checkWarn, "not running (no socket at %s)", sock)
	default:
		r.add("daemon", checkFail, "%s exists but no daemon answers (%v); a stale socket from a crash?", sock, unwrapUnreachable(err))
	}
	if sockErr == nil {
		ownerOnly(r, "socket", sock)
	}
	daemonPID := o.checkDiscovery(r, home, status)
	o.checkDatabase(r, ctx, home, conn, status != nil)
	checkOrphans(r, home, daemonPID)
	checkWorkspaces(r, ctx, home, conn, status != nil)

	r.OK = !slices.ContainsFunc(r.Checks, func(c doctorCheck) bool { return c.Status == checkFail })
	o.output.human(&r)
	if o.output.structured() {
		if err := o.output.write(w, r); err != nil {
			return err
		}
	} else if err := o.table(w, r); err != nil {
		return err
	}
	if !r.OK {
		return exitWith(exitProblems, errors.New("doctor found problems"), false)
	}
	return nil
}

func unwrapUnreachable(err error) error {
	var ue *unreachableError
	if errors.As(err, &ue) {
		return ue.err
	}
	return err
}

func (o *doctorOptions) checkHome(r *doctorReport, home string) {
	fi, err := os.Stat(home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.add("home", checkFail, "%s does not exist (wrong --home? shardd creates it on first start)", home)
		return
	case err != nil:
		r.add("home", checkFail, "%v", err)
		return
	case !fi.IsDir():
		r.add("home", checkFail, "%s is not a directory", home)
		return
	}
	ownerOnly(r, "home", home)
}

// ownerOnly checks that path belongs to this user and that nobody else
// may read or write it.
func ownerOnly(r *doctorReport, name, path string) {
	fi, err := os.Lstat(path)
	if err != nil {
		r.add(name, checkFail, "%v", err)
		return
	}
	perm := fi.Mode().Perm()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		r.add(name, checkFail, "%s belongs to uid %d, not to you (uid %d)", path, st.Uid, os.Geteuid())
		return
	}
	if perm&0o077 != 0 {
		want := "600"
		if fi.IsDir() {
			want = "700"
		}
		r.add(name, checkFail, "%s is mode %04o, readable or writable by others; want owner-only (chmod %s %s)", path, perm, want, path)
		return
	}
	r.add(name, checkOK, "%s (%04o)", path, perm)
}

// checkConfig loads the configuration the way shardd does, with this home.
func (o *doctorOptions) checkConfig(r *doctorReport, home string) {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SHARD_HOME=") })
	env = append(env, "SHARD_HOME="+home)
	userHome, _ := os.UserHomeDir()
	cfg, err := config.Load(nil, env, userHome)
	if err != nil {
		r.add("config", checkFail, "%v", err)
		return
	}
	if _, err := os.Stat(cfg.ConfigFile); err != nil {
		r.add("config", checkOK, "no %s: defaults and SHARD_* environment load", cfg.ConfigFile)
		return
	}
	r.add("config", checkOK, "%s loads", cfg.ConfigFile)
}

// discovery is the part of daemon.json doctor reads.
type discovery struct {
	PID int `json:"pid"`
}

// checkDiscovery checks daemon.json against the running daemon and returns
// the daemon's pid (0 when none runs).
func (o *doctorOptions) checkDiscovery(r *doctorReport, home string, status *protocol.DaemonStatusData) int {
	path := filepath.Join(home, discoveryName)
	b, err := os.ReadFile(path)
	var d discovery
	if err == nil {
		err = json.Unmarshal(b, &d)
	}
	switch {
	case status != nil && errors.Is(err, fs.ErrNotExist):
		r.add("discovery", checkWarn, "%s is missing although shardd (pid %d) runs", path, status.PID)
		return status.PID
	case status != nil && err != nil:
		r.add("discovery", checkFail, "%s: %v", path, err)
		return status.PID
	case status != nil && d.PID != status.PID:
		r.add("discovery", checkFail, "%s names pid %d, but the daemon on the socket is pid %d", path, d.PID, status.PID)
		return status.PID
	case status != nil:
		ownerOnly(r, "discovery", path)
		return status.PID
	case errors.Is(err, fs.ErrNotExist):
		return 0 // no daemon, no file: as it should be
	case err != nil:
		r.add("discovery", checkWarn, "%s: %v", path, err)
		return 0
	case processAlive(d.PID):
		r.add("discovery", checkFail, "%s names pid %d, which is alive but does not answer on the socket (hung?)", path, d.PID)
		return d.PID
	}
	r.add("discovery", checkWarn, "stale %s: pid %d is gone (the daemon did not stop cleanly)", path, d.PID)
	return 0
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// checkDatabase checks shard.db's permissions and its consistency: through
// the daemon while it runs (it holds the file), else read-only here.
func (o *doctorOptions) checkDatabase(r *doctorReport, ctx context.Context, home string, conn *client.Conn, up bool) {
	path := filepath.Join(home, dbName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		r.add("database", checkWarn, "no %s yet (shardd creates it on first start)", path)
		return
	}
	ownerOnly(r, "database", path)
	if up {
		var data protocol.DaemonCheckData
		if err := conn.Call(ctx, &protocol.DaemonCheck{Header: protocol.Header{Type: protocol.TypeDaemonCheck}}, &data); err != nil {
			r.add("store", checkFail, "daemon.check: %v", err)
			return
		}
		if !data.StoreOK {
			r.add("store", checkFail, "bbolt check failed: %s", data.StoreError)
			return
		}
		r.add("store", checkOK, "consistent (checked by the daemon), schema version %d", data.SchemaVersion)
		return
	}
	st, err := store.Open(path, store.Options{ReadOnly: true, Timeout: offlineLockWait})
	if errors.Is(err, store.ErrLocked) {
		r.add("store", checkFail, "%s is locked by a process that does not answer on the socket (a hung shardd?)", path)
		return
	}
	if err != nil {
		r.add("store", checkFail, "%v", err)
		return
	}
	defer st.Close()
	if err := st.Check(); err != nil {
		r.add("store", checkFail, "%v", err)
		return
	}
	v, _ := st.SchemaVersion()
	r.add("store", checkOK, "consistent (checked read-only, daemon stopped), schema version %d", v)
}

// checkOrphans looks for agent runtimes of this home outside the daemon's
// process tree: processes whose environment holds SHARD_HOME=<home> and a
// SHARD_AGENT_ID, none of whose ancestors is the daemon. Their own
// children (tools they run) are reported under them.
func checkOrphans(r *doctorReport, home string, daemonPID int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		r.add("orphans", checkSkip, "cannot list processes: %v", err)
		return
	}
	self := os.Getpid()
	var orphans []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue // gone, or not ours to read
		}
		vars := bytes.Split(env, []byte{0})
		agentID := ""
		inHome := false
		for _, kv := range vars {
			if string(kv) == "SHARD_HOME="+home {
				inHome = true
			} else if v, ok := bytes.CutPrefix(kv, []byte("SHARD_AGENT_ID=")); ok {
				agentID = string(v)
			}
		}
		if !inHome || agentID == "" {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil || st.Exited() {
			continue
		}
		if procstat.DescendsFrom(st.PPID, daemonPID) {
			continue
		}
		orphans = append(orphans, fmt.Sprintf("pid %d (%s): %s", pid, agentID, cmdline(pid)))
	}
	switch {
	case len(orphans) > 0:
		r.add("orphans", checkFail, "%d process(es) outside the daemon: %s; stop them (kill PID) or restart shardd, which reaps what it recorded",
			len(orphans), strings.Join(orphans, "; "))
	case daemonPID == 0:
		r.add("orphans", checkOK, "no agent runtime of this home runs (daemon stopped)")
	default:
		r.add("orphans", checkOK, "every agent runtime of this home runs under the daemon (pid %d)", daemonPID)
	}
}

// cmdline is a process's command line, shortened.
func cmdline(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return "?"
	}
	return truncate(strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "), 80)
}

func (o *doctorOptions) table(w io.Writer, r *doctorReport) error {
	p := newPalette(w, o.g.noColor)
	tw := newTable(w)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	for _, c := range r.Checks {
		status := c.Status
		switch c.Status {
		case checkOK:
			status = p.paint(sgrGreen, status)
		case checkWarn:
			status = p.paint(sgrYellow, status)
		case checkFail:
			status = p.paint(sgrRed, status)
		default:
			status = p.paint(sgrDim, status)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, status, c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write checks: %w", err)
	}
	if r.OK {
		_, err := fmt.Fprintln(w, p.paint(sgrGreen, "No problems found."))
		return err
	}
	return nil
}
