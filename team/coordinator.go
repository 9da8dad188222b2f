package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/procs"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/supervisor"
	"github.com/shard-dev/shard/team/attend"
	"github.com/shard-dev/shard/workspaces/git"
)

// Deps are the coordinator's collaborators and settings.
type Deps struct {
	// Store holds the team records; required.
	Store *store.Store
	// Group owns every goroutine the coordinator starts; required. It is
	// the daemon's, closed after the actor system stopped; the
	// coordinator's stop cancels what it runs there and waits for it.
	Group *xsync.Group
	// Hub receives the team_* broadcasts; nil broadcasts nothing.
	Hub *outbox.Hub
	// Logger; nil discards. Task text, prompts and answers are never logged.
	Logger *slog.Logger
	// Link reaches the rest of the daemon (the lead, the workers' runs,
	// merges and retires). nil: the commands are answered and recorded,
	// but no goal runs (unit tests of the commands).
	Link Link
	// Forks is the daemon's gate every process the coordinator starts goes
	// through (git, the CI command); nil starts each at once.
	Forks *procs.ForkGate
	// Git is the git layer (the repository check of a submit, the
	// worker's commit); nil is the real git through Forks.
	Git *git.Client
	// Repo is the main checkout of a goal submitted without a cwd (config
	// team.repo); "" makes cwd required.
	Repo string
	// MaxWorkers caps the tasks doing at once across every goal (config
	// team.max_workers); 0 means 3.
	MaxWorkers int
	// CICommand runs with `sh -c` in a task's worktree when its worker
	// finishes (config team.ci_command); "" is no CI (unknown).
	CICommand string
	// CITimeout bounds one CI run (config team.ci_timeout); 0 means 10m.
	CITimeout time.Duration
	// Socket is the daemon's unix socket, which the Watchers of the leads
	// dial (team/attend); "" attends no lead (then permissions and
	// questions are the lead's other clients' alone).
	Socket string
	// Timeout bounds one command's store and link work; 0 means 2 minutes.
	// A worker's run is followed without a bound.
	Timeout time.Duration
}

// Coordinator is the team coordinator actor. It serves team.* commands
// (each in a goroutine: the store's commits and the link's calls never run
// on the mailbox) and owns the work in flight: the tasks whose workers it
// follows, and the scheduling pass that starts ready tasks while fewer
// than MaxWorkers are doing.
type Coordinator struct {
	deps Deps
	// sys and self let its goroutines message the actor (set at Started).
	sys  *actor.ActorSystem
	self *actor.PID
	// life is cancelled when the actor stops: the link calls and the
	// runs followed end (the runs themselves are the jobs coordinator's
	// and stay as they are on disk).
	life context.Context
	stop context.CancelFunc
	// running counts the goroutines it started; the stop waits for them.
	running sync.WaitGroup
	// following holds the tasks whose worker runs are followed now: what
	// counts against MaxWorkers.
	following map[string]uint64
	// gen numbers the followers, so that the end of an old one never
	// forgets a newer one of the same task.
	gen uint64
	// refollow holds the tasks doing again (Request changes) while their
	// last follower was still finishing: each is followed once it ends.
	refollow map[string]bool
	// scheduling: a scheduling pass is in flight; again: another was
	// asked for meanwhile.
	scheduling, again bool
	// ready: Ready arrived (the gateway serves, the link works); until
	// then nothing is started.
	ready bool
	// leads serializes the start of a lead per repository, so that two
	// goals submitted together share one lead.
	leads keyedMutex
	// requests are the requests the Watchers reported and not resolved
	// yet, each with the channel its decision's goroutine closes.
	requests map[string]chan struct{}
	// watchMu protects watchers, the Watchers of the leads (by agent id),
	// started from the goroutines that start leads.
	watchMu  sync.Mutex
	watchers map[string]*attend.Watcher
}

// Props returns the coordinator's props.
func Props(deps Deps) *actor.Props {
	if deps.Store == nil || deps.Group == nil {
		panic("team: Deps.Store and Deps.Group are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Git == nil {
		deps.Git = git.New(&git.Exec{Forks: deps.Forks})
	}
	if deps.MaxWorkers <= 0 {
		deps.MaxWorkers = 3
	}
	if deps.CITimeout <= 0 {
		deps.CITimeout = 10 * time.Minute
	}
	if deps.Timeout <= 0 {
		deps.Timeout = 2 * time.Minute
	}
	return actor.PropsFromProducer(func() actor.Actor {
		life, stop := context.WithCancel(context.Background())
		return &Coordinator{deps: deps, life: life, stop: stop, following: map[string]uint64{}, refollow: map[string]bool{},
			requests: map[string]chan struct{}{}, watchers: map[string]*attend.Watcher{}}
	}, actor.WithSupervisor(supervisor.StopOnFailure()))
}

// Receive implements actor.Actor.
func (co *Coordinator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		co.sys, co.self = c.ActorSystem(), c.Self()
	case *Ready:
		if co.ready {
			return
		}
		co.ready = true
		co.recover(c)
	case *registry.Command:
		co.onCommand(c, m)
	case *kick:
		co.schedule(c)
	case *picked:
		co.onPicked(c, m)
	case *followTask:
		if _, busy := co.following[m.taskID]; busy {
			// Its last follower is finishing (it reviewed the run that
			// ended); the new run is followed once it has.
			co.refollow[m.taskID] = true
			return
		}
		co.follow(c, m.taskID)
	case *followEnded:
		if co.following[m.taskID] == m.gen {
			delete(co.following, m.taskID)
			if co.refollow[m.taskID] {
				delete(co.refollow, m.taskID)
				co.follow(c, m.taskID)
			}
		}
		co.schedule(c)
	case *recovered:
		for _, id := range m.taskIDs {
			co.follow(c, id)
		}
		co.schedule(c)
	case *attended:
		co.onAttended(m)
	case *actor.Stopping:
		co.stop()
		co.stopWatchers()
		co.running.Wait()
	case *actor.Stopped, *actor.Restarting:
	default:
		co.deps.Logger.Warn("team: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// goWork runs f in the daemon's group under the actor's life, bounded by
// bound (0: no bound). It reports false, running nothing, once the group
// refused (the daemon is stopping).
func (co *Coordinator) goWork(bound time.Duration, f func(ctx context.Context)) bool {
	co.running.Add(1)
	ok := co.deps.Group.Go(func() {
		defer co.running.Done()
		ctx, cancel := co.life, context.CancelFunc(func() {})
		if bound > 0 {
			ctx, cancel = context.WithTimeout(co.life, bound)
		}
		defer cancel()
		f(ctx)
	})
	if !ok {
		co.running.Done()
	}
	return ok
}

// emit broadcasts committed records' events to every connection.
func (co *Coordinator) emit(evs ...[]byte) {
	if co.deps.Hub == nil {
		return
	}
	for _, ev := range evs {
		co.deps.Hub.Broadcast(ev)
	}
}

// feed appends a feed item and announces it; a failure is logged, never
// fatal to the step it describes.
func (co *Coordinator) feed(f store.FeedItem) {
	item, err := co.deps.Store.AppendFeed(f)
	if err != nil {
		co.deps.Logger.Warn("team: append feed", "goal", f.GoalID, "err", err)
		return
	}
	co.emit(feedEvent(item))
}

// codeErr gives a store error its protocol code.
func codeErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*protocol.Error](err); ok {
		return err
	}
	code := protocol.CodeInternal
	switch {
	case errors.Is(err, store.ErrNotFound):
		code = protocol.CodeNotFound
	case errors.Is(err, store.ErrInvalid):
		code = protocol.CodeInvalidRequest
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrExists):
		code = protocol.CodeConflict
	}
	return protocol.Errorf(code, "%w", err)
}

func reply(cmd *registry.Command, data any) {
	cmd.Client.Send(protocol.NewResponse(cmd.Header.ID, cmd.Header.Type, data))
}

func fail(cmd *registry.Command, err error) {
	cmd.Client.Send(protocol.NewErrorResponse(cmd.Header.ID, cmd.Header.Type, err))
}

// keyedMutex is one mutex per key, made on first use.
type keyedMutex struct {
	mu sync.Mutex // protects m
	m  map[string]*sync.Mutex
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*sync.Mutex{}
	}
	l := k.m[key]
	if l == nil {
		l = &sync.Mutex{}
		k.m[key] = l
	}
	k.mu.Unlock()
	l.Lock()
	return l.Unlock
}
