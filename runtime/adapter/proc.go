package adapter

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shard-dev/shard/internal/procs/procstat"
)

// eofGrace is how long Close waits for the agent to exit after its stdin
// closed before it sends SIGTERM; termGrace how long it then waits before
// it kills it. Most agents take stdin's end as their cue; some do not
// (claude-agent-acp 0.23.1 keeps running), and SIGTERM still lets those
// end their own children before SIGKILL would orphan them.
const (
	eofGrace  = time.Second
	termGrace = 2 * time.Second
)

// Proc is the third-party agent's process as every backend runs it: in the
// agent's cwd with the adapter's environment and stderr (the agent log),
// killed with the adapter (Pdeathsig; it is in the runtime's process group
// already), ended by closing its stdin — the cue most ACP agents and pi
// take — then sent SIGTERM, and killed if it still does not go. Backends
// embed it for Done, Err and Close (adapter.Backend).
type Proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	err   error // set before done closes
	once  sync.Once
}

// NewProc returns a Proc not started yet: Done never closes until Start
// succeeded and Exited ran.
func NewProc() *Proc { return &Proc{done: make(chan struct{})} }

// Start starts argv and returns its stdin and stdout. The caller reads
// stdout to EOF and then calls Exited.
func (p *Proc) Start(argv []string, dir string, env []string, stderr io.Writer) (io.WriteCloser, io.Reader, error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("no agent command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stderr = dir, env, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	p.cmd, p.stdin = cmd, stdin
	return stdin, stdout, nil
}

// Exited is called by the stdout reader at EOF: it waits for the process,
// runs cleanup (may be nil), records how it ended and closes Done.
func (p *Proc) Exited(cleanup func()) {
	werr := p.cmd.Wait()
	if cleanup != nil {
		cleanup()
	}
	p.err = werr
	if werr == nil {
		p.err = errors.New("the agent closed its output")
	}
	close(p.done)
}

// Done implements adapter.Backend: closed once the agent has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err implements adapter.Backend: how the agent ended, nil while it runs.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Close implements adapter.Backend: stdin is closed; an agent still
// running after eofGrace gets SIGTERM, and one still running termGrace
// later SIGKILL. Close returns once the agent has exited.
func (p *Proc) Close() error {
	if p.cmd == nil {
		return nil
	}
	p.once.Do(func() { _ = p.stdin.Close() })
	steps := []struct {
		wait time.Duration
		sig  syscall.Signal
	}{{eofGrace, syscall.SIGTERM}, {termGrace, syscall.SIGKILL}}
	for _, s := range steps {
		t := time.NewTimer(s.wait)
		select {
		case <-p.done:
			t.Stop()
			reapOrphans()
			return nil
		case <-t.C:
			_ = p.cmd.Process.Signal(s.sig)
		}
	}
	<-p.done
	reapOrphans()
	return nil
}

// AdoptOrphans makes this process the reaper of the descendants of what it
// starts (PR_SET_CHILD_SUBREAPER): a process the agent started that
// outlives the agent (claude-agent-acp's claude CLI, once node is gone)
// becomes this process's child, and Proc.Close waits for it (termGrace,
// then SIGKILL) before it returns. Under the daemon this matters: when the
// adapter exits the daemon kills what is left of its process group, so
// without the wait an agent's child that is still shutting down (the CLI
// saving its session on SIGTERM) would be cut short. It is process-wide:
// call it once, in a process whose other children are its agents (the
// adapter's own; tests running one agent at a time).
func AdoptOrphans() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("adopt orphans: %w", err)
	}
	return nil
}

// reapOrphans waits for the children this process adopted (see
// AdoptOrphans), each being the rest of an agent's process tree, for at
// most termGrace, kills those still running and reaps them all; processes
// orphaned meanwhile are waited for in turn.
func reapOrphans() {
	if !subreaper() {
		return
	}
	deadline := time.Now().Add(termGrace)
	for kids := children(); len(kids) > 0; kids = children() {
		exited := make(chan struct{}, len(kids))
		for _, pid := range kids {
			go func() {
				var ws unix.WaitStatus
				for {
					if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
						break
					}
				}
				exited <- struct{}{}
			}()
		}
		t := time.NewTimer(time.Until(deadline))
		for range kids {
			select {
			case <-exited:
			case <-t.C:
				for _, pid := range kids {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
				<-exited
			}
		}
		t.Stop()
	}
}

// children lists this process's live children (zombies included: they
// are reaped).
func children() []int {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.PPID == self {
			out = append(out, pid)
		}
	}
	return out
}

// subreaper reports whether AdoptOrphans made this process a subreaper: the
// kernel keeps that flag, so no state of the package does.
func subreaper() bool {
	var on int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&on)), 0, 0, 0); err != nil {
		return false
	}
	return on != 0
}
