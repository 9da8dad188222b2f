package proc

import (
	"time"

	"github.com/shard-dev/shard/internal/logfile"
	"github.com/shard-dev/shard/internal/procs"
)

// Message is a message of the proc actor family: what the actor receives
// (Write, Term, Kill, CheckStarved and its own procExited) and what it
// sends its agent (Output, Exited, Starved). The interface is sealed by its unexported method;
// Receive logs anything else it is sent.
type Message interface{ procMessage() }

func (Output) procMessage()       {}
func (Exited) procMessage()       {}
func (Write) procMessage()        {}
func (Term) procMessage()         {}
func (Kill) procMessage()         {}
func (procExited) procMessage()   {}
func (CheckStarved) procMessage() {}
func (Starved) procMessage()      {}

// Spec describes the process of one Runtime generation.
type Spec struct {
	// Epoch is the generation number, echoed on every message to the agent.
	Epoch int64
	// Path and Args are the command (Args excludes the program name).
	Path string
	Args []string
	// Dir is the working directory (the Agent's cwd).
	Dir string
	// Env is the full environment of the child.
	Env []string
	// StderrPath receives the child's stderr (appended, mode 0600),
	// through a pipe Logs copies into it, rotated by size while the
	// runtime runs; "" discards it.
	StderrPath string
	// Logs is the daemon's one copier of every runtime's stderr pipe
	// (logfile.Mux: one goroutine for all, instead of one per live
	// runtime); nil copies this runtime's in a goroutine of its own.
	Logs *logfile.Mux
	// LogMaxBytes and LogBackups bound StderrPath's file (log.max_bytes,
	// log.backups; see logfile.Open). LogMaxBytes 0 means both defaults
	// (logfile.DefaultMaxBytes, logfile.DefaultBackups).
	LogMaxBytes int64
	LogBackups  int
	// Track, when set, is told about the process so that a later daemon can
	// kill what this one leaves behind after a crash.
	Track Tracker
	// Sweep, when set, are environment entries (see procs.KillWithEnv)
	// that every process of this generation inherits: once the runtime
	// has exited, whatever still carries them is killed too — tool
	// subprocesses in sessions of their own, out of the group's reach.
	Sweep []string
	// Sweeper, when set, runs the Sweep in scans shared with the other
	// runtimes exiting at the same time (procs.Sweeper); nil scans alone.
	Sweeper *procs.Sweeper
	// Forks, when set, is the daemon's gate every process it starts goes
	// through, one at a time (procs.ForkGate); nil starts at once.
	Forks *procs.ForkGate
	// Nice, when not 0, is the niceness the whole process group runs
	// at (setpriority PRIO_PGRP right after the start, so every thread of
	// the runtime and whatever it starts later inherit it): the daemon's
	// own work — acks, commits, fan-out — is then served first when the
	// runtimes keep the CPUs busy (jobs.nice, for subagent children).
	Nice int
	// Idle moves every thread of the runtime to SCHED_IDLE right after
	// the start (procs.SchedIdle; its niceness stays), so that any other
	// work preempts it at once; what it starts later inherits the policy
	// (jobs.sched_idle, for subagent children).
	Idle bool
}

// Tracker records live runtime processes durably (the daemon's store).
// Its methods are called from the runtime actor.
type Tracker interface {
	Started(epoch int64, pid, pgid int, startTime uint64)
	Exited(epoch int64)
}

// Output carries stdout records of the runtime, in order, to the agent
// actor: every record that was read together, so that a burst costs one
// mailbox hop. Lines is never empty; each record is a separate slice
// (without its newline) whose capacity ends where it does.
type Output struct {
	Epoch int64
	Lines [][]byte
}

// Exited tells the agent actor that the process is gone and all of its
// output has been delivered.
type Exited struct {
	Epoch int64
	// ExitCode is the process exit status, or -1 when it was killed by a
	// signal or never started.
	ExitCode int
	// Reason is a short human description ("exit status 3", "signal:
	// killed", "spawn: …"). It never contains runtime output.
	Reason string
	// Started is false when the process could not be spawned at all.
	Started bool
}

// Write queues one record (without newline) for the runtime's stdin.
type Write struct{ Line []byte }

// Term closes stdin and sends SIGTERM to the process group.
type Term struct{}

// Kill sends SIGKILL to the process group.
type Kill struct{}

// CheckStarved asks the actor whether its process has been starved of the
// CPU since it started or since the last CheckStarved; it answers the
// sender with Starved. The agent asks when a runtime is not ready by its
// readiness bound: a runtime that waited for a CPU, rather than one that
// hung, gets another bound instead of being killed.
type CheckStarved struct{}

// Starved answers CheckStarved.
type Starved struct {
	Epoch int64
	// Starved is true when the process's threads spent at least a quarter
	// of the time since the last check, and at least 100 ms, runnable but
	// waiting for a CPU (procs.RunQueueWait): a SCHED_IDLE runtime while
	// other work keeps every core busy. A process that is gone, or whose wait cannot be
	// read, is not starved.
	Starved bool
	// Waited and Over are that wait and that time.
	Waited, Over time.Duration
}

// procExited is the exit-wait goroutine's report to the actor itself.
type procExited struct {
	code   int
	reason string
}
