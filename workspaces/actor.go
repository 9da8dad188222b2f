package workspaces

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/procs"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/supervisor"
	"github.com/shard-dev/shard/workspaces/git"
)

// Deps are the workspace actor's collaborators.
type Deps struct {
	// Store holds the workspace records and the agent manifests; required.
	Store *store.Store
	// Registry serves the agents of new workspaces (registry.Adopt) and
	// answers registry.AgentStates for the live check of retire; required.
	Registry *actor.PID
	// Group owns every goroutine the actor starts (all git calls and store
	// commits run there, never on the mailbox); required. It is the
	// daemon's, closed after the actor system stopped. The actor's stop
	// cancels the work it runs there (killing its git) and waits for it.
	Group *xsync.Group
	// Clock stamps records; nil is the wall clock.
	Clock clock.Clock
	// Logger; nil discards.
	Logger *slog.Logger
	// Hub receives the workspace_* broadcasts; nil broadcasts nothing.
	Hub *outbox.Hub
	// Node is this daemon's cluster node name, carried by the workspace
	// events' projections (WorkspaceInfo.node) so that they can travel to
	// the other nodes' clients (docs/protocol.md §13 "Events of other
	// nodes"); "" on a single shardd, where they carry none.
	Node string
	// Root is the directory under which worktrees are created
	// (config workspaces.root, default $SHARD_HOME/worktrees); required,
	// absolute.
	Root string
	// CopyFiles are paths relative to the main checkout's root copied into
	// every new worktree before its agent is recorded (config
	// workspaces.copy_files: untracked setup such as ".env"). A missing
	// file is skipped; a symlink or a non-regular file is skipped too (a
	// choice: the copy never follows a link out of the repository).
	CopyFiles []string
	// SetupCommand runs in every new worktree after CopyFiles and before
	// its agent is recorded (config workspaces.setup_command). It is split
	// on spaces and exec'd without a shell, like runtime.command, with
	// SHARD_WORKSPACE_ID, SHARD_WORKSPACE_CWD and SHARD_REPOSITORY_CWD set,
	// bounded by Timeout. A failure rolls the create back (CONFLICT naming
	// the command and the tail of its output). "" runs nothing.
	SetupCommand string
	// Git is the git layer; nil is the real git binary, started through
	// Forks.
	Git *git.Client
	// Forks is the daemon's gate every process the workspace actor starts
	// goes through (git, the setup command; procs.ForkGate); nil starts
	// each at once.
	Forks *procs.ForkGate
	// DefaultMode is the mode of agents launched without one ("build").
	DefaultMode string
	// Models resolves the provider and model of the agents launched
	// (zero: as given).
	Models agent.Models
	// Timeout bounds one command's git and store work; 0 means 2 minutes.
	Timeout time.Duration
	// Failpoint, when set (by tests only), is called off the mailbox at
	// every Step of create and retire, after the step is durable. A test
	// models a crash there by not returning (runtime.Goexit ends the
	// command's goroutine: no later step, no rollback, no response) and
	// then starts a new actor on the same store. nil does nothing.
	Failpoint func(Step)
	// OnReconciled, when set, is called (off the mailbox) once startup
	// reconciliation ended, with its error (tests wait on it).
	OnReconciled func(error)
}

// Actor is the workspace actor: it owns every workspace record. Its
// mailbox only dispatches: each command runs in a goroutine of Deps.Group,
// serialized per repository by git.Locks, and reports back with *done.
type Actor struct {
	deps  Deps
	locks *git.Locks
	// claims are the workspaces runs are using (claims.go).
	claims *claims
	// jobs is the jobs coordinator (AttachJobs), asked by retire about
	// subagent runs in flight; nil until attached.
	jobs *actor.PID
	// reconciled: startup reconciliation ended. Until then the isolation
	// requests of the jobs coordinator wait in held (see isolation.go).
	reconciled bool
	held       []heldRequest
	// work runs every goroutine of the actor; the actor's stop cancels it
	// (inflight.go).
	work *inflight
}

// heldRequest is an isolation request that waits for reconciliation.
type heldRequest struct {
	to  *actor.PID
	msg Message
}

// Props returns the workspace actor's props.
func Props(deps Deps) *actor.Props {
	deps.Clock = clock.Or(deps.Clock)
	if deps.Group == nil || deps.Store == nil || deps.Root == "" {
		panic("workspaces: Deps.Group, Deps.Store and Deps.Root are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Git == nil {
		deps.Git = git.New(&git.Exec{Forks: deps.Forks})
	}
	if deps.DefaultMode == "" {
		deps.DefaultMode = "build"
	}
	if deps.Timeout <= 0 {
		deps.Timeout = 2 * time.Minute
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{deps: deps, locks: &git.Locks{}, claims: newClaims(), work: newInflight(deps.Group, deps.Timeout)}
	}, actor.WithSupervisor(supervisor.StopOnFailure()))
}

// Receive implements actor.Actor.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.startReconcile(c)
	case *registry.Command:
		a.onCommand(c, m)
	case *done:
		if a.work.take(m) {
			a.onDone(c, m)
		}
	case *reconciled:
		if m.err != nil {
			a.deps.Logger.Error("workspaces: startup reconciliation", "err", m.err)
		}
		a.reconciled = true
		held := a.held
		a.held = nil
		for _, h := range held {
			a.onIsolation(c, h.to, h.msg)
		}
	case *AttachJobs:
		a.jobs = m.PID
	case *Release:
		a.claims.release(m.WorkspaceID, m.RunID)
	case *Plan, *Materialize, *DiffStat:
		if mz, ok := m.(*Materialize); ok {
			// Claimed on arrival, before it waits for anything: a retire
			// that checks after this is refused busy (claims.go).
			a.claims.claim(mz.WorkspaceID, mz.RunID, mz.AgentID)
		}
		if !a.reconciled {
			a.held = append(a.held, heldRequest{to: c.Sender(), msg: m.(Message)})
			return
		}
		a.onIsolation(c, c.Sender(), m.(Message))
	case *actor.Stopping:
		// Nobody waits for a held request that will never run.
		a.refuseHeld(c)
		// The work in flight is cancelled, its git killed, rather than
		// awaited; what it finished is answered here, as the mailbox
		// handles nothing more.
		for _, d := range a.work.halt() {
			a.onDone(c, d)
		}
	case *actor.Stopped, *actor.Restarting:
	default:
		a.deps.Logger.Warn("workspaces: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// op is one command's work, run off the mailbox.
type op func(ctx context.Context, w *worker) *done

func (a *Actor) onCommand(c actor.Context, cmd *registry.Command) {
	var f op
	switch req := cmd.Cmd.(type) {
	case *protocol.WorkspaceCreate:
		// The agent's provider and model are resolved before anything
		// is created (docs/protocol.md §13, providers).
		var err error
		if req.Provider, req.Model, err = a.deps.Models.ResolveCreate("", req.Provider, req.Model); err != nil {
			fail(cmd, err)
			return
		}
		f = func(ctx context.Context, w *worker) *done { return w.create(ctx, req) }
	case *protocol.WorkspaceAttach:
		var err error
		if req.Provider, req.Model, err = a.deps.Models.ResolveCreate("", req.Provider, req.Model); err != nil {
			fail(cmd, err)
			return
		}
		f = func(ctx context.Context, w *worker) *done { return w.attach(ctx, req) }
	case *protocol.WorkspaceList:
		f = func(ctx context.Context, w *worker) *done { return w.list(ctx, req) }
	case *protocol.WorkspaceStatus:
		f = func(ctx context.Context, w *worker) *done { return w.status(ctx, req) }
	case *protocol.WorkspaceRetire:
		f = func(ctx context.Context, w *worker) *done { return w.retire(ctx, req) }
	case *protocol.WorkspaceDiff:
		f = func(ctx context.Context, w *worker) *done { return w.diff(ctx, req) }
	case *protocol.WorkspaceMerge:
		f = func(ctx context.Context, w *worker) *done { return w.merge(ctx, req) }
	default:
		fail(cmd, protocol.Errorf(protocol.CodeInvalidRequest, "%s is not supported by this daemon yet", cmd.Header.Type))
		return
	}
	sys, self := c.ActorSystem(), c.Self()
	w := a.worker(sys)
	started := a.work.Go(func(ctx context.Context) {
		d := f(ctx, w)
		d.cmd = cmd
		d.err = shutdownErr(ctx, d.err)
		a.work.deliver(sys, self, d)
	})
	if !started {
		fail(cmd, errShuttingDown())
	}
}

func (a *Actor) worker(sys *actor.ActorSystem) *worker {
	return &worker{deps: a.deps, locks: a.locks, claims: a.claims, sys: sys, jobs: a.jobs}
}

func (a *Actor) onDone(c actor.Context, d *done) {
	if len(d.adopt) > 0 && a.deps.Registry != nil {
		// Before the response: the registry serves the agent before the
		// client can address it.
		c.Send(a.deps.Registry, &registry.Adopt{Agents: d.adopt})
	}
	if d.cmd != nil {
		if d.err != nil {
			if protocol.CodeOf(d.err) == protocol.CodeInternal {
				a.deps.Logger.Error("workspaces: command failed", "type", d.cmd.Header.Type, "err", d.err)
			}
			fail(d.cmd, d.err)
		} else {
			reply(d.cmd, d.data)
		}
	}
	if a.deps.Hub != nil {
		for _, ev := range d.events {
			a.deps.Hub.Broadcast(ev)
		}
	}
}

func (a *Actor) startReconcile(c actor.Context) {
	sys, self := c.ActorSystem(), c.Self()
	w := a.worker(sys)
	a.work.Go(func(ctx context.Context) {
		err := w.reconcile(ctx)
		if a.deps.OnReconciled != nil {
			a.deps.OnReconciled(err)
		}
		sys.Root.Send(self, &reconciled{err: err})
	})
}

func reply(cmd *registry.Command, data any) {
	cmd.Client.Send(protocol.NewResponse(cmd.Header.ID, cmd.Header.Type, data))
}

func fail(cmd *registry.Command, err error) {
	cmd.Client.Send(protocol.NewErrorResponse(cmd.Header.ID, cmd.Header.Type, err))
}
