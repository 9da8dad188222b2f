package git

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/shard-dev/shard/internal/procs"
)

// Defaults for Exec; each field documents its own.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultMaxOutput = 64 << 20
	maxStderr        = 4 << 10
	waitDelay        = 2 * time.Second
)

// Invocation is one git command.
type Invocation struct {
	// Dir is the working directory (git's -C); required.
	Dir string
	// Args are git's arguments, without the leading "git".
	Args []string
	// Stdin is fed to git; nil means /dev/null.
	Stdin []byte
	// ReadOnly marks a status-like call: GIT_OPTIONAL_LOCKS=0 so it never
	// takes the index lock a concurrent agent's `git commit` needs.
	ReadOnly bool
}

// Runner runs git. It is an interface so tests inject faults and timeouts
// and the workspace actor can wrap it (metrics, logging, failpoints).
// Implementations must be safe for concurrent use. On failure they return an
// *Error; stdout is returned even then (merge-tree writes its tree on
// conflicts).
type Runner interface {
	Run(ctx context.Context, inv Invocation) (stdout []byte, err error)
}

// Exec is the Runner over the real git binary, exec'd directly (never via a
// shell) with a scrubbed environment: inherited GIT_* variables are dropped
// (a daemon started from a git hook would otherwise act on the hook's
// repository), prompts, pagers and editors are disabled, messages are in
// the C locale, stdin is /dev/null unless Invocation.Stdin is set. The zero
// value is ready to use. Safe for concurrent use.
type Exec struct {
	// Path of the git binary; default "git" looked up in PATH.
	Path string
	// Timeout bounds each invocation on top of the caller's context;
	// default DefaultTimeout (30 s). Negative means no extra bound.
	Timeout time.Duration
	// MaxOutput caps stdout in bytes; beyond it the command fails with
	// ErrOutputTooLarge. Default DefaultMaxOutput (64 MiB).
	MaxOutput int
	// Env is appended to the scrubbed environment (e.g. HOME for tests).
	Env []string
	// Forks, when set, is the daemon's gate every git process starts
	// through (procs.ForkGate: one fork at a time); nil starts at once.
	Forks *procs.ForkGate
}

var _ Runner = (*Exec)(nil)

// Run implements Runner.
func (x *Exec) Run(ctx context.Context, inv Invocation) ([]byte, error) {
	timeout := x.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	path := x.Path
	if path == "" {
		path = "git"
	}
	limit := x.MaxOutput
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	args := append([]string{"-c", "core.pager=cat", "-c", "color.ui=false", "-c", "core.quotePath=false"}, inv.Args...)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = inv.Dir
	cmd.Env = environ(inv.ReadOnly, x.Env)
	cmd.WaitDelay = waitDelay
	if inv.Stdin != nil {
		cmd.Stdin = bytes.NewReader(inv.Stdin)
	} // nil Stdin is /dev/null for os/exec
	stdout := &capped{limit: limit}
	stderr := &capped{limit: maxStderr, truncate: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := x.Forks.Run(cmd)
	if err == nil && !stdout.over {
		return stdout.buf.Bytes(), nil
	}
	ge := &Error{Args: redact(inv.Args), ExitCode: -1, Stderr: stderr.buf.String(), Err: err}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		ge.Err = ctx.Err()
	case stdout.over:
		ge.Err = ErrOutputTooLarge
	case errors.As(err, &ee) && ee.Exited():
		ge.ExitCode = ee.ExitCode()
	}
	return stdout.buf.Bytes(), ge
}

// environ is the scrubbed environment for one git process.
func environ(readOnly bool, extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GIT_"), k == "LC_ALL", k == "LANG", k == "LANGUAGE", k == "PAGER", k == "EDITOR", k == "VISUAL":
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=",
		"GIT_EDITOR=true", "GIT_SEQUENCE_EDITOR=true", "GIT_PAGER=cat", "PAGER=cat",
		"LC_ALL=C", "LANG=C",
		"GIT_MERGE_AUTOEDIT=no",
	)
	if readOnly {
		env = append(env, "GIT_OPTIONAL_LOCKS=0")
	}
	return append(env, extra...)
}

// capped is a bounded buffer: past limit it either truncates silently
// (stderr) or records the overflow (stdout) and fails the write so git
// stops early on EPIPE.
type capped struct {
	buf      bytes.Buffer
	limit    int
	truncate bool
	over     bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.limit - c.buf.Len()
	if len(p) <= room {
		return c.buf.Write(p)
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	if c.truncate {
		return len(p), nil
	}
	c.over = true
	return 0, ErrOutputTooLarge
}

var urlCreds = regexp.MustCompile(`(://)[^/@\s]+@`)

// redact removes credentials from URL-looking arguments, so an *Error can be
// logged and shown.
func redact(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = urlCreds.ReplaceAllString(a, "${1}***@")
	}
	return out
}

// Locks serializes operations per repository: one at a time per common dir
// (Repo.CommonDir), because a create is several git steps plus a durable
// record, and git's own index/ref locks only cover single steps. The zero
// value is ready; safe for concurrent use. Entries are dropped when unused.
type Locks struct {
	mu sync.Mutex // protects m
	m  map[string]*repoLock
}

type repoLock struct {
	ch   chan struct{} // one token: held while len == 1
	refs int           // waiters + holder; mu protects
}

// Lock waits until key (a common dir) is free or ctx ends. The returned
// unlock must be called exactly once.
func (l *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*repoLock)
	}
	rl := l.m[key]
	if rl == nil {
		rl = &repoLock{ch: make(chan struct{}, 1)}
		l.m[key] = rl
	}
	rl.refs++
	l.mu.Unlock()

	release := func() {
		l.mu.Lock()
		rl.refs--
		if rl.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case rl.ch <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-rl.ch
			release()
		})
	}, nil
}
