//go:build linux

package shardtest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shard-dev/shard/internal/buildlock"
	"github.com/shard-dev/shard/internal/procs/procstat"
)

// Buffer is a bytes.Buffer safe for one writer (a subprocess pipe) and
// concurrent readers, so a suite can read a daemon's output while it runs.
// Max > 0 caps what is kept (later writes are dropped but reported as
// written, so the process never sees a write error); 0 keeps everything.
type Buffer struct {
	Max int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write keeps p (up to Max).
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Max > 0 && s.b.Len() >= s.Max {
		return len(p), nil
	}
	return s.b.Write(p)
}

// String returns what was kept so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Proc is a subprocess started by StartProc and waited for in the
// background, so its exit can be observed without blocking (Done, Exited).
type Proc struct {
	Cmd   *exec.Cmd
	done  chan struct{} // closed once the process has been waited for
	state *os.ProcessState
}

// StartProc starts cmd, whose Stdout and Stderr the caller set. The process
// gets SIGKILL if the starting process dies first (Pdeathsig), so nothing a
// crashed suite started outlives it.
func StartProc(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("shardtest: start %s: %w", cmd.Path, err)
	}
	go func() {
		_ = cmd.Wait() // a non-zero exit is in state
		p.state = cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Done is closed once the process exited and was waited for.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// State is the exit state; nil while the process runs.
func (p *Proc) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.state
}

// WaitExit waits up to timeout for the process to end and returns its
// state, or an error saying it still runs.
func (p *Proc) WaitExit(timeout time.Duration) (*os.ProcessState, error) {
	select {
	case <-p.done:
		return p.state, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("%s (pid %d) still running after %s", filepath.Base(p.Cmd.Path), p.PID(), timeout)
	}
}

// Kill sends SIGKILL unless the process already exited, and waits for it.
func (p *Proc) Kill() {
	if !p.Exited() {
		_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// Terminate asks the process to stop (SIGTERM, unless it already exited)
// and waits up to grace; past grace it is killed. It returns an error
// unless the process exited with status 0, now or before.
func (p *Proc) Terminate(grace time.Duration) error {
	if !p.Exited() {
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.Exited() {
			return fmt.Errorf("shardtest: SIGTERM %s: %w", filepath.Base(p.Cmd.Path), err)
		}
		select {
		case <-p.done:
		case <-time.After(grace):
			p.Kill()
			return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", filepath.Base(p.Cmd.Path), grace)
		}
	}
	if st := p.state; st == nil || !st.Success() {
		return fmt.Errorf("%s exited uncleanly: %v", filepath.Base(p.Cmd.Path), st)
	}
	return nil
}

// ProcsWithEnv returns the live (non-zombie) processes other than the
// caller whose environment holds the exact entry kv ("NAME=value"): the
// processes of one Shard home are found by "SHARD_HOME=<home>".
func ProcsWithEnv(kv string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	entry := []byte(kv + "\x00")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !(bytes.HasPrefix(env, entry) || bytes.Contains(env, append([]byte{0}, entry...))) {
			continue
		}
		if st, err := procstat.Read(pid); err != nil || st.Exited() {
			continue // gone, or a zombie: gone for our purposes
		}
		pids = append(pids, pid)
	}
	return pids
}

// KillEnv SIGKILLs every live process whose environment holds kv and waits,
// up to bound, until none is left. It returns the pids it found first (nil
// when there were none).
func KillEnv(kv string, bound time.Duration) []int {
	first := ProcsWithEnv(kv)
	deadline := time.Now().Add(bound)
	for pids := first; len(pids) > 0 && time.Now().Before(deadline); pids = ProcsWithEnv(kv) {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(PollInterval)
	}
	return first
}

// CleanEnv is the caller's environment without any SHARD_* variable, so
// the developer's own settings never leak into a run, plus extra.
func CleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARD_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TempDir makes a short temporary directory (unix socket paths are limited
// to 108 bytes, which t.TempDir() can exceed); the caller removes it.
func TempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", fmt.Errorf("shardtest: %w", err)
	}
	return dir, nil
}

// Tail is the last n bytes of s, marked with "…" when cut.
func Tail(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Build runs one `go build` (with flags, e.g. -race) that writes the
// commands named (shardd, shardctl: packages under cmd/) into dir, and
// returns their paths in order. The go tool's output goes to log.
//
// It builds with -buildvcs=false: stamping the version control state runs
// git, which reads the developer's ~/.gitconfig, and callers may build
// before their tests' home is isolated (testhost.WithHome).
func Build(dir string, flags []string, log io.Writer, cmds ...string) ([]string, error) {
	args := append([]string{"build", "-buildvcs=false"}, flags...)
	// With -o naming a directory, one go build writes every executable.
	args = append(args, "-o", dir+string(filepath.Separator))
	paths := make([]string, 0, len(cmds))
	for _, c := range cmds {
		args = append(args, "github.com/shard-dev/shard/cmd/"+c)
		paths = append(paths, filepath.Join(dir, c))
	}
	defer buildlock.Lock()() // one build at a time across test processes
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("shardtest: build %s: %w", strings.Join(cmds, " and "), err)
	}
	return paths, nil
}
