package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/protocol"
)

// bash parameters.
const (
	// bashPath is the shell every command runs in.
	bashPath = "/bin/bash"
	// maxBashTimeout bounds timeout_ms.
	maxBashTimeout = time.Hour
	// killGrace is how long a process group has between SIGTERM and
	// SIGKILL.
	killGrace = 500 * time.Millisecond
	// groupPoll is how often a terminating group is checked for members.
	groupPoll = 10 * time.Millisecond
	// drainGrace is how long output is still read after the group is
	// gone, for a process that left the group but holds the output pipe.
	drainGrace = 200 * time.Millisecond
	// askCommandLen caps the command quoted in a permission prompt (the
	// whole command is in the details).
	askCommandLen = 120
)

const bashSchema = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The command line, run by /bin/bash -c in the working directory."},
    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 3600000, "description": "Kill the command after this many milliseconds. Default: the agent's bash timeout (2 minutes unless configured)."}
  },
  "required": ["command"],
  "additionalProperties": false
}`

func bashTool() Tool {
	return Tool{
		Name: NameBash,
		Description: "Run a shell command with /bin/bash -c in the working directory. It is not interactive: stdin is " +
			"empty and there is no terminal. stdout and stderr are returned combined; long output keeps its start and " +
			"end. The exit code is reported; a non-zero exit marks the call as failed. The command is killed when it " +
			"times out or the turn is aborted, and processes it leaves running in the background are ended when it " +
			"finishes (start them with setsid, output redirected, to keep them alive).",
		Schema: []byte(bashSchema),
		Check: func(args map[string]any) error {
			_, _, err := parseBashArgs(args, Env{})
			return err
		},
		Ask:     askBash,
		Preview: noPreview,
		Run:     runBash,
	}
}

// parseBashArgs returns the command and the call's timeout.
func parseBashArgs(args map[string]any, env Env) (string, time.Duration, error) {
	command, err := nonEmptyArg(args, "command")
	if err != nil {
		return "", 0, err
	}
	ms, err := optIntArg(args, "timeout_ms", 0, 1)
	if err != nil {
		return "", 0, err
	}
	if ms > maxBashTimeout.Milliseconds() {
		return "", 0, fmt.Errorf("%w: \"timeout_ms\" must be at most %d", ErrInvalidArgs, maxBashTimeout.Milliseconds())
	}
	timeout := env.WithDefaults().BashTimeout
	if ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	return command, timeout, nil
}

func askBash(env Env, args map[string]any) (string, []protocol.PermissionDetail) {
	command, _, _ := parseBashArgs(args, env)
	short := command
	if first, _, multi := strings.Cut(command, "\n"); multi {
		short = first + " …"
	}
	short = clip(short, askCommandLen)
	details := []protocol.PermissionDetail{{Label: "command", Value: command, Format: "command"}}
	if wd, err := env.cwd(); err == nil {
		details = append(details, protocol.PermissionDetail{Label: "cwd", Value: wd, Format: "path"})
	}
	return fmt.Sprintf("Allow running %s?", short), details
}

func runBash(ctx context.Context, env Env, args map[string]any) Result {
	env = env.WithDefaults()
	command, timeout, err := parseBashArgs(args, env)
	if err != nil {
		return ErrorResult(err.Error())
	}
	wd, err := env.cwd()
	if err != nil {
		return ErrorResult(err.Error())
	}
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return errorf("bash: %v", err)
	}
	defer pr.Close()
	cmd := exec.Command(bashPath, "-c", command)
	cmd.Dir = wd
	cmd.Env = env.Environ           // nil: the process's environment
	cmd.Stdout, cmd.Stderr = pw, pw // *os.File: the shell writes to the pipe directly
	// A session of its own is a process group of its own (pgid = pid)
	// with no controlling terminal, so nothing can prompt on the
	// runtime's terminal. Pdeathsig ends the shell (not what it started)
	// if the runtime dies without ending the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return errorf("bash: %v", err)
	}
	pgid := cmd.Process.Pid

	out := newHeadTail(env.MaxOutput)
	exited := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(out, pr) })
	wg.Go(func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(exited)
	})

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var stopped string
	select {
	case <-exited:
	case <-ctx.Done():
		stopped = "aborted"
	case <-timer.C:
		stopped = fmt.Sprintf("timed out after %v", timeout)
	}
	if stopped != "" {
		select {
		case <-exited: // it finished as it was being stopped
			stopped = ""
		default:
		}
	}
	// End the group: the shell itself when it was stopped, and whatever
	// it left running either way.
	endGroup(pgid)
	<-exited
	// Every writer in the group is gone; give one that left the group a
	// moment, then stop reading.
	_ = pr.SetReadDeadline(time.Now().Add(drainGrace))
	wg.Wait()

	code := exitCode(cmd.ProcessState)
	text := out.finish()
	res := TextResult(text)
	res.ExitCode = &code
	res.IsError = code != 0
	if stopped != "" {
		sep := ""
		if text != "" && !strings.HasSuffix(text, "\n") {
			sep = "\n"
		}
		res.Content.Text = text + sep + fmt.Sprintf("[command %s; its process group was killed]", stopped)
		res.IsError = true
	}
	return res
}

// endGroup terminates process group pgid, if it has members: SIGTERM, then
// SIGKILL for what is left after killGrace. It returns once the group is
// empty or SIGKILL was sent.
func endGroup(pgid int) {
	if !groupAlive(pgid) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.NewTimer(killGrace)
	defer deadline.Stop()
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		case <-tick.C:
			if !groupAlive(pgid) {
				return
			}
		}
	}
}

// groupAlive reports whether process group pgid has a member that is not
// a zombie. Orphaned members are reaped by init (or a subreaper), which may
// take its time; a zombie can do nothing more, so it does not count.
func groupAlive(pgid int) bool {
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil {
			continue // gone meanwhile
		}
		if st.PGRP == pgid && !st.Exited() {
			return true
		}
	}
	return false
}

// exitCode is the shell's exit status; 128+signal when a signal killed it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
