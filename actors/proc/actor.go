package proc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/internal/actorref"
	"github.com/shard-dev/shard/internal/logfile"
	"github.com/shard-dev/shard/internal/procs"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
)

// stdinQueueMax bounds the records waiting for the child's stdin behind the
// batch being written. Commands are low-rate; a child that stops reading
// is a stuck child, and what is pushed beyond the bound is dropped (logged).
const stdinQueueMax = 1024

// stdoutBuffer is the read buffer on a child's stdout. Records up to this
// size (deltas, tool events) are read without a copy; larger ones are
// assembled through one. 4 KiB per live runtime instead of the codec's
// 64 KiB default keeps an idle agent cheap (the per-agent budget in
// BENCHMARKS.md); at 256-byte deltas one read still takes ~16 records, so
// read syscalls and Output messages stay a small share of the per-event
// cost (the relay benchmark gains nothing from a larger buffer).
const stdoutBuffer = 4 << 10

// drainBound is how long the exit path waits for stdout and stderr to
// reach EOF after the process and its group are gone.
const drainBound = 2 * time.Second

// Actor owns one child process. Its parent is the agent actor, which
// receives Output and Exited.
type Actor struct {
	spec   Spec
	agent  *actor.PID
	logger *slog.Logger
	// goroutines owns the reader, exit-wait and stdin writer goroutines.
	goroutines *xsync.Group

	cmd         *exec.Cmd
	pgid        int
	stdin       *stdinQueue
	stdinClosed bool
	exited      bool
	// checked and waited are the time of the start or of the last
	// CheckStarved, and the process's wait for a CPU then.
	checked time.Time
	waited  time.Duration
}

// Props returns the props of a runtime actor for spec. The agent receives
// Output and Exited messages. Every goroutine the actor starts runs in
// goroutines (required), which its owner closes once the actor is gone:
// they all end when the child process is gone and its output drained.
func Props(spec Spec, agent *actor.PID, logger *slog.Logger, goroutines *xsync.Group) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{spec: spec, agent: agent, logger: logger, goroutines: goroutines}
	})
}

// Receive implements actor.Actor.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *Write:
		a.write(m.Line)
	case *Term:
		a.closeStdin()
		a.signal(syscall.SIGTERM)
	case *Kill:
		a.closeStdin()
		a.signal(syscall.SIGKILL)
	case *CheckStarved:
		c.Respond(a.checkStarved())
	case *procExited:
		a.exited = true
		if a.spec.Track != nil {
			a.spec.Track.Exited(a.spec.Epoch)
		}
		// The agent stops this actor once it has handled Exited: stopping
		// here would let *actor.Terminated (a system message) overtake it.
		c.Send(a.agent, &Exited{Epoch: a.spec.Epoch, ExitCode: m.code, Reason: m.reason, Started: true})
	case *actor.Stopping:
		// Safety net only; must not block or panic: a panic in Stopping
		// would leave the actor half stopped, and a block stalls the system.
		if !a.exited {
			a.signal(syscall.SIGKILL)
		}
		a.closeStdin()
	case *actor.Stopped:
		actorref.Release(c) // the agent may hold this generation's PID
	case *actor.Restarting:
	default:
		a.logger.Warn("runtime actor: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *Actor) start(c actor.Context) {
	sys := c.ActorSystem()
	self := c.Self()
	fail := func(err error) {
		a.exited = true
		c.Send(a.agent, &Exited{Epoch: a.spec.Epoch, ExitCode: -1, Reason: "spawn: " + err.Error()})
	}

	stderr, logs, err := a.openLog()
	if err != nil {
		fail(err)
		return
	}
	defer stderr.Close() // the child holds its own descriptor

	outR, outW, err := os.Pipe()
	if err != nil {
		logs.Close()
		fail(err)
		return
	}
	cmd := exec.Command(a.spec.Path, a.spec.Args...)
	cmd.Dir = a.spec.Dir
	cmd.Env = a.spec.Env
	cmd.Stdout = outW
	cmd.Stderr = stderr
	// Own process group, so a stop reaches tool subprocesses too; and the
	// child dies with the daemon (Pdeathsig), so a daemon killed without
	// a shutdown leaves no runtime behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdinW, err := cmd.StdinPipe()
	if err != nil {
		outR.Close()
		outW.Close()
		logs.Close()
		fail(err)
		return
	}
	if err := a.spec.Forks.Start(cmd); err != nil {
		outR.Close()
		outW.Close()
		logs.Close()
		fail(err)
		return
	}
	outW.Close() // only the child (and its children) hold the write end now
	a.cmd = cmd
	a.pgid = cmd.Process.Pid
	a.checked = time.Now()
	if a.spec.Nice != 0 {
		// Linux applies PRIO_PGRP to every thread of every process in the
		// group; threads and processes created afterwards inherit it, and
		// Renice settles the runtime's threads that were being created
		// meanwhile. Only the first instructions of the new image ran at
		// the daemon's own priority. A failure (a seccomp filter, say)
		// costs priority only.
		if err := procs.Renice(a.pgid, a.spec.Nice); err != nil {
			a.logger.Warn("runtime actor: setpriority", "pgid", a.pgid, "nice", a.spec.Nice, "err", err)
		}
	}
	if a.spec.Idle {
		// Before the daemon writes the runtime its first line (the stdin
		// queue starts below), so it has started no subprocess yet: its
		// threads are all there is. A failure costs priority only.
		if err := procs.SchedIdle(a.pgid); err != nil {
			a.logger.Warn("runtime actor: SCHED_IDLE", "pid", a.pgid, "err", err)
		}
	}
	if a.spec.Track != nil {
		st, _ := procs.StartTime(a.pgid)
		a.spec.Track.Started(a.spec.Epoch, a.pgid, a.pgid, st)
	}
	a.stdin = newStdinQueue(stdinW, a.goroutines)

	readerDone := make(chan struct{})
	if !a.goroutines.Go(func() { a.readStdout(sys, outR, readerDone) }) {
		// The daemon is stopping (its goroutines are closed): no runtime
		// may start. The process is killed; nothing waits for it.
		logs.Close()
		a.refuse(c, outR)
		return
	}
	started := a.goroutines.Go(func() {
		// Wait for the exit in the netpoller, so that a live runtime
		// does not hold an OS thread blocked in waitid; Wait then only
		// reaps (it falls back to blocking without pidfd support).
		procs.WaitExit(cmd.Process.Pid)
		err := cmd.Wait()
		// The runtime is gone: nothing it started may outlive it.
		_ = syscall.Kill(-a.pgid, syscall.SIGKILL)
		if a.spec.Sweeper != nil {
			a.spec.Sweeper.KillWithEnv(a.spec.Sweep...)
		} else {
			procs.KillWithEnv(a.spec.Sweep...)
		}
		// Both outputs drain within one bound. The stderr copy ends before
		// Exited too, so that the next generation's copy never writes the
		// same log file alongside this one's.
		drain := time.NewTimer(drainBound)
		select {
		case <-readerDone:
		case <-drain.C:
			outR.Close()
			logs.Close()
			<-readerDone
		}
		select {
		case <-logs.Done():
		case <-drain.C:
			logs.Close()
			<-logs.Done()
		}
		drain.Stop()
		if err := logs.Err(); err != nil {
			a.logger.Warn("runtime log", "epoch", a.spec.Epoch, "err", err)
		}
		code, reason := describeExit(cmd, err)
		sys.Root.Send(self, &procExited{code: code, reason: reason})
	})
	if !started {
		a.refuse(c, nil) // the reader ends at EOF once the group is killed
	}
}

// refuse kills a process just started when its goroutines were refused
// (the daemon is stopping) and reports it as never started; outR, when
// set, is the stdout nothing reads.
func (a *Actor) refuse(c actor.Context, outR *os.File) {
	_ = syscall.Kill(-a.pgid, syscall.SIGKILL)
	if outR != nil {
		outR.Close()
	}
	a.closeStdin()
	a.exited = true
	c.Send(a.agent, &Exited{Epoch: a.spec.Epoch, ExitCode: -1, Reason: "spawn: the daemon is stopping"})
}

const (
	// maxBatch bounds the records of one Output message.
	maxBatch = 512
	// slabMax bounds one allocation the records of a batch share.
	slabMax = 16 << 10
)

// readStdout sends every record to the agent actor, in order, then closes
// done. The records that were read together (already buffered behind the
// first one) go out as one Output, copied into one allocation: one mailbox
// hop and one allocation per batch instead of per record. A batch never
// waits for more input, so it adds no latency.
func (a *Actor) readStdout(sys *actor.ActorSystem, r io.ReadCloser, done chan<- struct{}) {
	defer close(done)
	defer r.Close()
	rd := protocol.NewReaderSize(r, stdoutBuffer, protocol.DefaultMaxRecord)
	var lines [][]byte
	for {
		lines = nil
		var slab []byte
		for len(lines) < maxBatch {
			if len(lines) > 0 && !rd.Ready() {
				break // nothing more without reading: send what we have
			}
			line, err := rd.Next()
			if errors.Is(err, protocol.ErrRecordTooLong) {
				a.logger.Warn("runtime output record over the size limit dropped", "epoch", a.spec.Epoch)
				continue
			}
			if err != nil {
				if len(lines) > 0 {
					sys.Root.Send(a.agent, &Output{Epoch: a.spec.Epoch, Lines: lines})
				}
				return
			}
			if rd.Owned() {
				lines = append(lines, line[:len(line):len(line)]) // a large record, already its own
				continue
			}
			if cap(slab)-len(slab) < len(line) {
				// Room for this record and the whole records buffered
				// behind it (most batches fit one allocation), up to
				// slabMax: small allocations reuse warm memory, where
				// large ones get fresh pages from the OS.
				slab = make([]byte, 0, max(len(line), min(len(line)+rd.Buffered(), slabMax)))
			}
			n := len(slab)
			slab = append(slab, line...)
			lines = append(lines, slab[n:len(slab):len(slab)])
		}
		sys.Root.Send(a.agent, &Output{Epoch: a.spec.Epoch, Lines: lines})
	}
}

func (a *Actor) write(line []byte) {
	if a.stdin == nil || a.stdinClosed || a.exited {
		return // stdin is closed after Term/Kill: the record is dropped
	}
	if !a.stdin.push(line) {
		a.logger.Warn("runtime stdin queue full; record dropped", "epoch", a.spec.Epoch)
	}
}

func (a *Actor) closeStdin() {
	if a.stdin == nil || a.stdinClosed {
		return
	}
	a.stdinClosed = true
	a.stdin.close()
}

func (a *Actor) signal(sig syscall.Signal) {
	if a.pgid == 0 || a.exited {
		return
	}
	_ = syscall.Kill(-a.pgid, sig)
}

func describeExit(cmd *exec.Cmd, err error) (int, string) {
	st := cmd.ProcessState
	if st == nil {
		if err != nil {
			return -1, err.Error()
		}
		return -1, "unknown"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, "signal: " + ws.Signal().String()
	}
	return st.ExitCode(), st.String()
}

// openLog returns what the child's stderr is: /dev/null when the spec has
// no StderrPath (logs is then a stream already ended), else the write end
// of a pipe that spec.Logs copies into the rotating log at StderrPath
// (logs). The child never holds the file itself, so the daemon rotates it
// by size while the runtime runs (log.max_bytes, log.backups); the copy is
// I/O off the mailbox, and the pipe's buffer absorbs bursts, so neither
// the runtime nor an actor waits on the disk.
func (a *Actor) openLog() (w *os.File, logs *logfile.Stream, err error) {
	path := a.spec.StderrPath
	if path == "" {
		w, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		return w, logfile.Ended(), err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("runtime log dir: %w", err)
	}
	maxBytes, keep := a.spec.LogMaxBytes, a.spec.LogBackups
	if maxBytes <= 0 {
		maxBytes, keep = logfile.DefaultMaxBytes, logfile.DefaultBackups
	}
	w, logs, err = a.spec.Logs.Add(path, maxBytes, keep)
	if err != nil {
		return nil, nil, fmt.Errorf("runtime log: %w", err)
	}
	return w, logs, nil
}

// starvedShare is the part of the time since the last check that a
// process must have spent waiting for a CPU to count as starved. A mute or
// hung runtime waits for no CPU (it sleeps or blocks); a starved one is
// runnable nearly all the time, so any share well between the two tells
// them apart (a choice: a quarter).
const starvedShare = 4

// starvedAtLeast is the least wait that counts as starved, however short
// the time since the last check: a process that just started waits a few
// ms for a CPU on any busy machine. Against the default readiness bound
// (10 s) a starved runtime waits seconds.
const starvedAtLeast = 100 * time.Millisecond

// checkStarved measures the process's wait for a CPU since the last check
// (or its start); a few small reads of /proc.
func (a *Actor) checkStarved() *Starved {
	now := time.Now()
	r := &Starved{Epoch: a.spec.Epoch, Over: now.Sub(a.checked)}
	if a.exited || a.pgid == 0 {
		return r
	}
	wait, err := procs.RunQueueWait(a.pgid)
	if err != nil {
		return r
	}
	r.Waited = wait - a.waited
	r.Starved = r.Waited >= starvedAtLeast && r.Waited*starvedShare >= r.Over
	a.checked, a.waited = now, wait
	return r
}
