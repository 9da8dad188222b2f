package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/shard-dev/shard/internal/procs/procstat"
)

// discovery is the content of daemon.json: how clients find a
// running daemon's pid and web URL without asking it.
type discovery struct {
	PID             int    `json:"pid"`
	Version         string `json:"version"`
	ProtocolVersion string `json:"protocol_version"`
	WebURL          string `json:"web_url"`
	Socket          string `json:"socket,omitempty"`
	// AgentCraftURL is the AgentCraft v1 endpoint's ws:// URL while it
	// serves (docs/agentcraft.md §10.1).
	AgentCraftURL string `json:"agentcraft_url,omitempty"`
}

// readDiscovery reads and decodes a discovery file.
func readDiscovery(path string) (discovery, error) {
	var d discovery
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("decode %s: %w", path, err)
	}
	return d, nil
}

// replaceStaleDiscovery removes a daemon.json found at startup, logging why
// it is stale. It is called with the store lock held, so no other daemon
// serves this home whatever the file says; the reason only tells the
// operator what happened to the previous one. Start writes a fresh file.
func replaceStaleDiscovery(path string, log *slog.Logger) {
	info, err := readDiscovery(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	reason := ""
	if err != nil {
		reason = "it cannot be read: " + err.Error()
	} else {
		reason = staleReason(info.PID, os.Getpid())
	}
	if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		log.Warn("stale daemon.json could not be removed; it will be overwritten", "path", path, "reason", reason, "err", rerr)
		return
	}
	log.Warn("replacing stale daemon.json left by a previous daemon", "path", path, "stale_pid", info.PID, "reason", reason)
}

// staleReason says why a discovery file naming pid cannot describe a live
// daemon on this home (self is this process's pid).
func staleReason(pid, self int) string {
	switch {
	case pid <= 0:
		return "it names no pid"
	case pid == self:
		return "its pid is this process's (pid reused, as in a container)"
	case !pidAlive(pid):
		return fmt.Sprintf("pid %d is not running", pid)
	}
	switch isShardd, known := isSharddDaemon(pid); {
	case !known:
		return fmt.Sprintf("pid %d is running but holds no lock on the store", pid)
	case !isShardd:
		return fmt.Sprintf("pid %d is not a shardd (pid reused)", pid)
	}
	return fmt.Sprintf("pid %d is a shardd that holds no lock on this home's store", pid)
}

// pidAlive reports whether a process with this pid exists (a zombie counts
// as gone).
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, err := procstat.Read(pid)
	return err != nil || !st.Exited()
}

// isSharddDaemon reports whether pid runs shardd as a daemon (not a
// `shardd agent` runtime), from /proc; known is false where /proc cannot
// tell.
func isSharddDaemon(pid int) (isShardd, known bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(raw) == 0 {
		return false, false
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	name := filepath.Base(args[0])
	if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe")); err == nil {
		name = filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	}
	if name != "shardd" {
		return false, true
	}
	return len(args) < 2 || args[1] != "agent", true
}
