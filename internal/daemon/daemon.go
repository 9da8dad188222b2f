package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/proc"
	"github.com/shard-dev/shard/actors/registry"
	acserver "github.com/shard-dev/shard/agentcraft/server"
	"github.com/shard-dev/shard/cluster"
	"github.com/shard-dev/shard/cluster/events"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/gateway"
	"github.com/shard-dev/shard/internal/clock"
	"github.com/shard-dev/shard/internal/logfile"
	"github.com/shard-dev/shard/internal/mailrun"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/procs"
	"github.com/shard-dev/shard/internal/sparep"
	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/jobs"
	"github.com/shard-dev/shard/jobs/remote"
	"github.com/shard-dev/shard/jobs/view"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/supervisor"
	"github.com/shard-dev/shard/team"
	"github.com/shard-dev/shard/telemetry"
	"github.com/shard-dev/shard/web"
	"github.com/shard-dev/shard/workspaces"
)

// Options are what the composition root knows beyond the config.
type Options struct {
	// Version is the build's version, announced in hello and daemon.json.
	Version string
	// RuntimePath and RuntimeArgs are the resolved runtime command.
	RuntimePath string
	RuntimeArgs []string
	// AdapterPath is the executable run as `agent --adapter <kind> --
	// <command…>` for the acp and pi runtime profiles; "" is
	// RuntimePath.
	AdapterPath string
	// Environ is the base environment of runtime children (os.Environ()).
	Environ []string
	// Logger receives the daemon's logs.
	Logger *slog.Logger
	// OnShutdown, when set, is called once as Shutdown begins, whatever
	// asked for it (a signal, daemon.shutdown); cmd/shardd tells systemd
	// STOPPING=1 there.
	OnShutdown func()
	// EnrollLimit and BootstrapLimit override the web listener's per-peer
	// rate limits of POST /enroll and POST /bootstrap. The zero value
	// keeps the gateway's defaults.
	EnrollLimit, BootstrapLimit gateway.RateLimit
	// GatewayClock is the clock of the gateway's credentials: WS tickets,
	// enrollment codes, browser sessions and the rate limits above. Tests
	// pass a manual clock to expire a ticket without waiting. Default nil:
	// the wall clock.
	GatewayClock clock.Clock
	// RegistryClock is the registry's clock: it stamps created agents and
	// times the passivation of idle ones (registry.Deps.Clock). Tests pass
	// a manual clock to passivate without waiting. Default nil: the wall
	// clock.
	RegistryClock clock.Clock
	// ClusterRouteBound, when set, learns the address a cluster node's
	// embedded NATS server bound for routes (with port 0, the port it
	// picked), before the node waits for the others: cmd/shardd prints
	// it, so that a script or a test can point relays at it.
	ClusterRouteBound func(addr string)
}

// Daemon is one running shardd.
type Daemon struct {
	cfg   *config.Config
	opts  Options
	log   *slog.Logger
	store *store.Store
	// metrics is served at /metrics and handed to every component.
	metrics *telemetry.Metrics

	sys      *actor.ActorSystem
	registry *actor.PID
	// jobs is the subagent-jobs coordinator, the registry's sibling.
	jobs *actor.PID
	// workspaces is the workspace actor, the registry's other sibling.
	workspaces *actor.PID
	// team is the team coordinator, a sibling too (docs/protocol.md §10.4).
	team *actor.PID
	// cluster is this node's cluster settings when clustered (any
	// cluster.* set), checked in New; node is the running node, nil on a
	// single shardd. Set before the gateway serves, read by cluster.status.
	cluster   cluster.Config
	clustered bool
	node      *cluster.Node
	// dir is the agent directory's part of this node (clusterdir.go);
	// nil on a single shardd.
	dir *directory
	// events relays the jobs' and workspaces' events between this node's
	// clients and the other nodes' (clusterevents.go), and listeners are
	// this node's connections speaking for other nodes' parents; nil on a
	// single shardd.
	events    *events.Relay
	listeners *events.Listeners
	// remoteRuns is the jobs coordinator's handle on the runs any node of
	// the cluster may take, the parent's node's side (jobs/remote); nil on
	// a single shardd.
	remoteRuns *remote.Runs
	// runs is this node's side of the runs any node may take
	// (clusterruns.go); nil on a single shardd.
	runs *clusterRuns
	// uplinkLn takes the other nodes' links carrying their children's
	// requests to this node's agents (clusteruplink.go); nil on a single
	// shardd.
	uplinkLn net.Listener
	// gate is the daemon's fork gate (set in Start), which the git of
	// claimed runs goes through too.
	gate *procs.ForkGate
	// startFailed is set by failStart: Shutdown has nothing to stop.
	startFailed bool
	// group owns the goroutines every actor starts off its mailbox (store
	// commits, selection saves, a runtime child's reader and exit wait);
	// it is closed once the actor system is down (every runtime child
	// gone), before the store they may write to.
	group *xsync.Group
	// logs copies every runtime's stderr pipe into its log, one goroutine
	// for all; closed after group (the runtimes' exit waits have seen
	// their copies end).
	logs *logfile.Mux
	hub  *outbox.Hub
	gw   *gateway.Gateway
	// acraft serves the AgentCraft v1 dialect when agentcraft.enabled
	// (nil otherwise): a client of the daemon's own socket.
	acraft *acserver.Server

	// commits and forks are the bursts of one sparep.Lender: the store's
	// group commits and the fork gate's starts, which park Ps in system
	// calls. They end with the store.
	commits, forks *sparep.Burst
	// mailboxes runs every actor's mailbox on reused goroutines
	// (mailrun): a mailbox run no longer starts a goroutine and grows its
	// stack. Closed once the actor system is down.
	mailboxes *mailrun.Pool

	startedAt time.Time
	stopOnce  sync.Once
	done      chan struct{}
	// forced is closed by the first Shutdown(true): a graceful shutdown
	// under way stops waiting for turns to finish and kills the runtimes.
	forceOnce sync.Once
	forced    chan struct{}
}

// New prepares the home directory and opens the store. A second daemon on
// the same home fails here, within store.lock_timeout, naming the home.
func New(cfg *config.Config, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// Refused cluster settings fail the start before the home changes.
	cc, clustered, err := clusterConfig(cfg, opts.Version)
	if err != nil {
		return nil, err
	}
	if err := PrepareHome(cfg); err != nil {
		return nil, err
	}
	// The metrics exist before the store so that every commit is timed.
	m := telemetry.New(opts.Version)
	// One P more while commits or process starts park the daemon's Ps in
	// system calls (package sparep).
	spare := &sparep.Lender{}
	commits := spare.Burst()
	st, err := store.Open(cfg.DBPath(), store.Options{Timeout: cfg.Store.LockTimeout, NoSync: cfg.Store.NoSync, OnCommit: m.ObserveCommit, Spare: commits})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			who := "another shardd"
			if info, rerr := readDiscovery(cfg.DiscoveryPath()); rerr == nil && info.PID > 0 {
				who = fmt.Sprintf("another shardd (pid %d)", info.PID)
			}
			return nil, fmt.Errorf("daemon: %s is already running with home %s: %w", who, cfg.Home, err)
		}
		return nil, fmt.Errorf("daemon: open store in %s: %w", cfg.Home, err)
	}
	// Opening the store built bbolt's freelist by walking every page of
	// the file (store.Open: the freelist is not synced), through a map of
	// every reachable page: tens of MiB of garbage for a long history,
	// which the collector would otherwise keep until the heap doubles
	// again, and the process's RSS with it. Hand it back once, now, so the
	// daemon's memory follows its live work, not its history.
	debug.FreeOSMemory()
	// Holding the store lock, this is the only daemon on the home: a
	// daemon.json left behind is stale (a crash, a kill -9).
	replaceStaleDiscovery(cfg.DiscoveryPath(), opts.Logger)
	return &Daemon{cfg: cfg, opts: opts, log: opts.Logger, store: st, cluster: cc, clustered: clustered, metrics: m, hub: outbox.NewHub(), done: make(chan struct{}), forced: make(chan struct{}),
		commits: commits, forks: spare.Burst(), mailboxes: mailrun.New(mailboxThroughput, mailboxesParked, mailboxLinger)}, nil
}

// Start brings up the actor tree and the gateway. When it returns nil the
// daemon accepts clients on both transports.
func (d *Daemon) Start() error {
	d.startedAt = time.Now()
	raiseFileLimit(d.log, d.cfg.Gateway.MaxConnections)
	d.group = &xsync.Group{OnPanic: func(err error) { d.log.Error("daemon: goroutine panicked", "err", err) }}
	actorLog := slog.New(minLevel{Handler: d.log.Handler(), min: slog.LevelWarn}).With("component", "actor")
	d.sys = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actorLog }),
		actor.WithDeadLetterRequestLogging(false),
	)
	cfg := d.cfg
	// What a crashed daemon left running (tool subprocesses outlive their
	// runtime's Pdeathsig) is killed before anything starts.
	if left, err := d.store.TakeRuntimes(); err != nil {
		return fmt.Errorf("daemon: read runtime records: %w", err)
	} else {
		killed := 0
		for _, p := range left {
			if procs.KillGroupIfSame(p.PID, p.PGID, p.StartTime) {
				killed++
			}
		}
		if killed > 0 {
			d.log.Warn("killed process groups left by the previous daemon", "groups", killed)
		}
	}
	// Tool subprocesses run in sessions of their own, out of those groups'
	// reach; every process a runtime of this home started carries its
	// SHARD_HOME and SHARD_AGENT_ID, and none of ours runs yet.
	if n := procs.KillWithEnv("SHARD_HOME="+cfg.Home, "SHARD_AGENT_ID="); n > 0 {
		d.log.Warn("killed runtime processes left by the previous daemon", "processes", n)
	}
	// Reconcile before anything is served (docs/protocol.md §10.3 restart
	// rules).
	if n, err := jobs.Reconcile(d.store, time.Now(), view.LastSignOfLife(d.store, cfg.SessionsDir(), filepath.Join(cfg.LogDir(), "agents"))); err != nil {
		return fmt.Errorf("daemon: reconcile jobs: %w", err)
	} else if n > 0 {
		d.metrics.ReconciledInterrupted(n)
		d.log.Warn("reconciled runs left unfinished by the previous daemon", "runs", n)
	}
	// Every process the daemon starts (runtimes, git, the workspace setup
	// command) goes through one gate: one fork at a time (procs.ForkGate).
	forks := &procs.ForkGate{Spare: d.forks}
	d.gate = forks
	logs, err := logfile.NewMux()
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	d.logs = logs
	deps := registry.Deps{
		Store:   d.store,
		Hub:     d.hub,
		Logger:  d.log.With("component", "registry"),
		Metrics: d.metrics,
		Agent: agent.Deps{
			Dispatcher: d.mailboxes,
			Goroutines: d.group,
			Hub:        d.hub,
			Logger:     d.log.With("component", "agent"),
			Metrics:    d.metrics,
			Node:       d.cluster.Node, // "" on a single shardd
			Models:     models(cfg),
			SaveSelection: func(agentID, provider, model, mode string) {
				err := d.store.UpdateAgent(agentID, func(a *store.Agent) error {
					a.Provider, a.Model, a.Mode = provider, model, mode
					return nil
				})
				if err != nil {
					d.log.Error("persist model/mode selection", "agent_id", agentID, "err", err)
				}
			},
			SaveUsage: func(agentID string, u store.Usage) {
				err := d.store.UpdateAgent(agentID, func(a *store.Agent) error {
					if a.Usage == nil || a.Usage.Turns <= u.Turns { // never older totals over newer
						a.Usage = &u
					}
					return nil
				})
				if err != nil && !errors.Is(err, store.ErrNotFound) { // removed meanwhile
					d.log.Error("persist usage totals", "agent_id", agentID, "err", err)
				}
			},
			SaveTitle: func(agentID, title string) error {
				return d.store.UpdateAgent(agentID, func(a *store.Agent) error {
					a.Title, a.Titled = title, true
					return nil
				})
			},
			Runtime: agent.RuntimeConfig{
				Path:           d.opts.RuntimePath,
				Args:           d.opts.RuntimeArgs,
				Env:            d.runtimeEnv(),
				SessionsDir:    cfg.SessionsDir(),
				LogDir:         cfg.LogDir(),
				LogMaxBytes:    int64(cfg.Log.MaxBytes),
				LogBackups:     cfg.Log.Backups,
				StartTimeout:   cfg.Runtime.StartTimeout,
				IdleTimeout:    cfg.Runtime.IdleTimeout,
				AbortGrace:     cfg.Kill.AbortGrace,
				TermGrace:      cfg.Kill.TermGrace,
				HeadlessPolicy: cfg.Headless.Policy,
				ChildNice:      runtimeNice(cfg.Jobs.Nice),
				ChildIdle:      cfg.Jobs.SchedIdle,
				Sweeper:        &procs.Sweeper{},
				Forks:          forks,
				Logs:           logs,
				Track: func(agentID string) proc.Tracker {
					return storeTracker{st: d.store, agentID: agentID, log: d.log}
				},
				Profiles: d.profiles(),
			},
		},
		DaemonStatus:  d.status,
		ClusterStatus: d.clusterStatus,
		Directory:     d.directoryDeps(),
		Group:         d.group,
		Clock:         d.opts.RegistryClock,
		OnShutdown: func(force bool) {
			// Shutdown waits for the registry to stop, so it cannot run on
			// the registry's mailbox, nor in d.group, which it closes: it
			// runs on a goroutine of its own, which d.done tracks (every
			// Shutdown and Done caller waits for it).
			go d.Shutdown(force)
		},
	}
	// The registry and the jobs coordinator are siblings under the root (root
	// ├── registry ── agent/<id>, ├── jobs ── job/<id>; the tree of
	// ARCHITECTURE.md), each stopped on failure rather than restarted. The
	// registry is spawned first: its Started loads the agents that the
	// coordinator's Started delivers pending reports to (through the
	// registry). The coordinator gets the registry's PID in its Deps; the
	// registry gets the coordinator's by AttachJobs, a message sent before
	// the gateway serves, so that it precedes every client command in the
	// registry's mailbox (a PID computed from the name "jobs" would work too,
	// but would rely on how protoactor names root children).
	pid, err := d.sys.Root.SpawnNamed(registry.Props(deps).Configure(actor.WithGuardian(supervisor.StopOnFailure()), actor.WithDispatcher(d.mailboxes)), "registry")
	if err != nil {
		d.group.Close()
		d.logs.Close()
		return fmt.Errorf("daemon: spawn registry: %w", err)
	}
	d.registry = pid
	// The workspace actor is the registry's third sibling,
	// attached like the coordinator before the gateway serves. It is
	// spawned before the coordinator, which gets its PID in Deps (job
	// actors ask it for the worktrees of isolated runs from their first
	// message on); it gets the coordinator's by workspaces.AttachJobs, sent
	// before the gateway serves, so that a retire can ask about runs.
	wd := workspaces.Deps{
		Store:        d.store,
		Registry:     d.registry,
		Group:        d.group,
		Logger:       d.log.With("component", "workspaces"),
		Hub:          d.hub,
		Node:         d.cluster.Node, // "" on a single shardd
		Root:         cfg.WorktreeRoot(),
		CopyFiles:    splitList(cfg.Workspaces.CopyFiles),
		SetupCommand: cfg.Workspaces.SetupCommand,
		DefaultMode:  deps.DefaultMode,
		Models:       deps.Agent.Models,
		Forks:        forks,
	}
	wpid, err := d.sys.Root.SpawnNamed(workspaces.Props(wd).Configure(actor.WithGuardian(supervisor.StopOnFailure()), actor.WithDispatcher(d.mailboxes)), "workspaces")
	if err != nil {
		d.stopActors()
		d.closeStore()
		return fmt.Errorf("daemon: spawn workspace actor: %w", err)
	}
	d.workspaces = wpid
	d.sys.Root.Send(d.registry, &registry.AttachWorkspaces{PID: d.workspaces})

	jd := jobs.Deps{
		Store:    d.store,
		Registry: d.registry,
		Logger:   d.log.With("component", "jobs"),
		Limits: jobs.Limits{
			MaxActive:          cfg.Jobs.MaxActive,
			MaxActivePerParent: cfg.Jobs.MaxActivePerParent,
			MaxTasks:           cfg.Jobs.MaxTasks,
			MaxDepth:           cfg.Jobs.MaxDepth,
			RunTimeout:         cfg.Jobs.RunTimeout,
		},
		Aliases:      splitList(cfg.Jobs.Aliases),
		Retention:    cfg.Jobs.Retention,
		Group:        d.group,
		Metrics:      d.metrics,
		Workspaces:   d.workspaces,
		KnownRuntime: deps.Agent.Runtime.KnownProfile,
		Models:       deps.Agent.Models,
		CheckTools:   deps.Agent.Runtime.CheckTools,
		Dispatcher:   d.mailboxes,
		Remote:       d.runsDeps(forks),
		RunEvents:    d.eventsDeps(),
	}
	jpid, err := d.sys.Root.SpawnNamed(jobs.Props(jd).Configure(actor.WithGuardian(supervisor.StopOnFailure())), "jobs")
	if err != nil {
		d.stopActors()
		d.closeStore()
		return fmt.Errorf("daemon: spawn jobs coordinator: %w", err)
	}
	d.jobs = jpid
	d.sys.Root.Send(d.registry, &registry.AttachJobs{PID: d.jobs})
	d.sys.Root.Send(d.workspaces, &workspaces.AttachJobs{PID: d.jobs})

	// The team coordinator is the last sibling: it acts on the others
	// through the daemon's own socket (team.SocketLink), so it needs no
	// PID of theirs; it is attached before the gateway serves and told
	// Ready once it does (its restart reconciliation uses the link).
	td := team.Deps{
		Store:      d.store,
		Group:      d.group,
		Hub:        d.hub,
		Logger:     d.log.With("component", "team"),
		Link:       team.SocketLink{Path: cfg.SocketPath()},
		Socket:     cfg.SocketPath(),
		Forks:      forks,
		Repo:       cfg.Team.Repo,
		MaxWorkers: cfg.Team.MaxWorkers,
		CICommand:  cfg.Team.CICommand,
		CITimeout:  cfg.Team.CITimeout,
	}
	tpid, err := d.sys.Root.SpawnNamed(team.Props(td).Configure(actor.WithGuardian(supervisor.StopOnFailure()), actor.WithDispatcher(d.mailboxes)), "team")
	if err != nil {
		d.stopActors()
		d.closeStore()
		return fmt.Errorf("daemon: spawn team coordinator: %w", err)
	}
	d.team = tpid
	d.sys.Root.Send(d.registry, &registry.AttachTeam{PID: d.team})

	// A cluster node joins before the gateway serves: every client of a
	// clustered daemon talks to a member. No cluster.* setting, no NATS.
	if d.clustered {
		if err := d.startCluster(d.cluster); err != nil {
			d.failStart()
			return err
		}
		if err := d.startUplink(); err != nil {
			d.failStart()
			return err
		}
	}
	d.gw = gateway.New(gateway.Config{
		SocketPath:   cfg.SocketPath(),
		WebAddr:      cfg.WebAddr(),
		PingInterval: cfg.Gateway.PingInterval,
		PingTimeout:  cfg.Gateway.PingTimeout,
		TicketTTL:    cfg.Gateway.TicketTTL,
		Limits:       outbox.Limits{MaxBytes: cfg.Gateway.OutboundMaxBytes, MaxMessages: cfg.Gateway.OutboundMaxMessages},
		Inbound: gateway.InboundLimits{MaxBytes: cfg.Gateway.InboundMaxBytes,
			MaxRecords: cfg.Gateway.InboundMaxRecords},
		MaxConnections: cfg.Gateway.MaxConnections,
		ServerVersion:  d.opts.Version,
		Metrics:        d.metrics,
		Credentials:    storeCredentials{st: d.store},
		Clock:          d.opts.GatewayClock,
		Page:           web.Handler(web.Options{}),
		Dispatcher:     d.mailboxes,
		Cluster:        d.gatewayClusterDeps(),
		Web: gateway.WebPolicy{
			Remote:               cfg.Web.Remote(),
			PublicHost:           cfg.Web.PublicHost,
			AllowedOrigins:       cfg.Web.AllowedOrigins,
			AllowInsecureRemote:  cfg.Web.AllowInsecureRemote,
			TrustProxy:           cfg.Web.TrustProxy,
			ForwardedProtoHeader: cfg.Web.ForwardedProtoHeader,
			ForwardedHostHeader:  cfg.Web.ForwardedHostHeader,
			EnrollTTL:            cfg.Web.EnrollTTL,
			SessionTTL:           cfg.Web.SessionTTL,
			EnrollLimit:          d.opts.EnrollLimit,
			BootstrapLimit:       d.opts.BootstrapLimit,
		},
	}, d.sys, d.registry, d.hub, d.log.With("component", "gateway"))
	if err := d.gw.Listen(); err != nil {
		d.failStart()
		return err
	}
	d.gw.Serve()
	if err := d.serveTunnel(); err != nil {
		d.gw.Close()
		d.failStart()
		return err
	}
	d.publishAddrs()
	d.sys.Root.Send(d.team, &team.Ready{})
	if cfg.Web.Remote() && cfg.Web.AllowInsecureRemote {
		d.log.Warn("web: insecure remote mode: plaintext HTTP reaches the network, so session cookies and tickets can be read on the way; use only on a trusted network, a VPN or an SSH tunnel",
			"public_host", cfg.Web.PublicHost)
	}
	if cfg.AgentCraft.Enabled {
		d.startAgentCraft()
	}
	if err := d.writeDiscovery(); err != nil {
		d.log.Warn("write discovery file", "err", err)
	}
	d.log.Info("shardd started", "version", d.opts.Version, "home", cfg.Home, "socket", cfg.SocketPath(), "web", d.gw.WebURL())
	return nil
}

// runtimeNice is the absolute niceness for subagent runtimes: the
// daemon's own plus jobs.nice, capped at 19, as nice(1) -n counts; 0 when the
// setting is 0 (runtimes keep the daemon's). Relative, so a daemon that
// was itself started niced never asks for a priority it may not raise.
func runtimeNice(add int) int {
	if add <= 0 {
		return 0
	}
	own := 0
	if p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil {
		own = 20 - p // the raw syscall answers 20 - nice (1..40)
	}
	return min(19, own+add)
}

// runtimeEnv passes the daemon's effective settings to runtime children, so
// flags given to shardd reach `shardd agent --headless` too.
func (d *Daemon) runtimeEnv() []string {
	cfg := d.cfg
	// The cluster's settings, its token above all, are the daemon's:
	// a runtime and the tools it runs never see them.
	env := slices.DeleteFunc(append([]string(nil), d.opts.Environ...), func(kv string) bool {
		return strings.HasPrefix(kv, "SHARD_CLUSTER_")
	})
	if _, err := os.Stat(cfg.ConfigFile); err == nil {
		env = append(env, "SHARD_CONFIG="+cfg.ConfigFile)
	}
	return append(env,
		"SHARD_HOME="+cfg.Home,
		"SHARD_SOCKET="+cfg.SocketPath(),
		"SHARD_HEADLESS_TIMEOUT="+cfg.Headless.Timeout.String(),
		"SHARD_PROVIDER_NAME="+cfg.Provider.Name,
		"SHARD_PROVIDER_BASE_URL="+cfg.Provider.BaseURL,
		"SHARD_PROVIDER_MODEL="+cfg.Provider.Model,
		"SHARD_PROVIDER_API_KEY_ENV="+cfg.Provider.APIKeyEnv,
		"SHARD_SIM_CONTEXT_WINDOW="+strconv.Itoa(cfg.Sim.ContextWindow),
		"SHARD_PROVIDER_PRICES="+cfg.Provider.Prices,
		// The providers besides the block, as the daemon read them: the
		// runtime serves exactly the catalog the daemon resolved creates
		// against. Names of key variables only, never keys.
		config.ProvidersEnv+"="+cfg.ProvidersJSON(),
		// Models that take no images (docs/protocol.md §13 P4).
		"SHARD_PROVIDER_TEXT_ONLY_MODELS="+cfg.Provider.TextOnlyModels,
		"SHARD_COMPACTION_ENABLED="+strconv.FormatBool(cfg.Compaction.Enabled),
		"SHARD_COMPACTION_KEEP_RECENT_TOKENS="+strconv.Itoa(cfg.Compaction.KeepRecentTokens),
	)
}

func (d *Daemon) status() protocol.DaemonStatusData {
	return protocol.DaemonStatusData{
		Version:         d.opts.Version,
		ProtocolVersion: protocol.Version,
		PID:             os.Getpid(),
		StartedAt:       d.startedAt.UnixMilli(),
		UptimeMs:        time.Since(d.startedAt).Milliseconds(),
		Home:            d.cfg.Home,
		WebURL:          d.WebURL(),
	}
}

// WebURL returns the base URL of the web listener ("" before Start).
func (d *Daemon) WebURL() string {
	if d.gw == nil {
		return ""
	}
	return d.gw.WebURL()
}

// BrowserURL returns the base URL a browser reaches the daemon at, where
// the dashboard is served: the web listener's own URL in loopback mode,
// the public origin in remote mode ("" before Start).
func (d *Daemon) BrowserURL() string {
	if d.gw == nil {
		return ""
	}
	return d.gw.BrowserURL()
}

// Done is closed when the daemon has shut down.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Shutdown stops the daemon once; later calls wait for the first. Graceful
// (force=false): stop accepting, let active turns finish and runtimes stop
// (bounded by shutdown.timeout, then forced), close clients, stop the actor
// tree, close the store. Force kills every runtime at once, and a forced
// call during a graceful shutdown cuts its wait short the same way (a
// second SIGTERM, shardctl shutdown --force): the rest, the store's close
// included, runs as in any shutdown.
func (d *Daemon) Shutdown(force bool) {
	if force {
		d.forceOnce.Do(func() { close(d.forced) })
	}
	d.stopOnce.Do(func() {
		defer close(d.done)
		if d.startFailed {
			return // failStart stopped everything Start had started
		}
		d.log.Info("shardd shutting down", "force", force)
		if d.opts.OnShutdown != nil {
			d.opts.OnShutdown()
		}
		if d.gw != nil {
			d.gw.StopAccepting()
		}
		if d.acraft != nil {
			// Its clients go first: it is a client of the gateway itself.
			_ = d.acraft.Close()
		}
		if d.registry != nil {
			d.stopTeam(d.cfg.Shutdown.Timeout)
			d.stopWorkspaces(d.cfg.Shutdown.Timeout)
			d.stopJobs(d.cfg.Shutdown.Timeout)
			// Claimed runs stop being followed with the local ones, before
			// the drain ends their turns: their records are left for the
			// next incarnation (or a survivor) to interrupt, once.
			d.stopRuns()
			d.drainAll(force)
		}
		if d.gw != nil {
			d.gw.Close()
		}
		// After the gateway: no client command reads the node any more.
		d.closeCluster()
		d.stopActors()
		_ = os.Remove(d.cfg.DiscoveryPath())
		if err := d.closeStore(); err != nil {
			d.log.Error("close store", "err", err)
		}
		d.log.Info("shardd stopped")
	})
	<-d.done
}

// failStart stops what a failed Start had started, once: the Shutdown
// that cmd/shardd calls after a failed Start then has nothing left to
// stop (the actor system's second shutdown would panic).
func (d *Daemon) failStart() {
	d.closeCluster()
	d.stopActors()
	d.closeStore()
	d.startFailed = true
}

// closeStore closes the store and ends the spare P's bursts: nothing
// commits or starts a process after it.
func (d *Daemon) closeStore() error {
	err := d.store.Close()
	d.commits.Stop()
	d.forks.Stop()
	return err
}

// stopJobs stops the jobs coordinator (and its job actors) before the
// agents are drained: no run starts during a shutdown, and a run cut short
// stays starting/active on disk, so the next start reconciles it to
// interrupted instead of recording the shutdown as a failure. The registry
// stops forwarding to it first, so that every subagent.* command is
// answered (CONFLICT from then on) and none reaches a stopped coordinator.
func (d *Daemon) stopJobs(bound time.Duration) {
	if d.jobs == nil {
		return
	}
	detached := make(chan struct{})
	d.sys.Root.Send(d.registry, &registry.DetachJobs{Done: detached})
	waitClosed(detached, bound) // bounded: a registry that failed answers nothing
	_ = d.sys.Root.StopFuture(d.jobs).Wait()
}

// stopTeam stops the team coordinator first of all: the registry stops
// forwarding team.* to it (CONFLICT from then on), then its stop cancels
// the link calls and run waits it has in flight and waits for them. The
// runs themselves are the jobs coordinator's: a task doing stays doing on
// disk, and the next start takes it up (its run is interrupted by then).
func (d *Daemon) stopTeam(bound time.Duration) {
	if d.team == nil {
		return
	}
	detached := make(chan struct{})
	d.sys.Root.Send(d.registry, &registry.DetachTeam{Done: detached})
	waitClosed(detached, bound)
	_ = d.sys.Root.StopFuture(d.team).Wait()
}

// stopWorkspaces stops the workspace actor before the agents are drained,
// the registry first ceasing to forward to it (as for the coordinator, see
// stopJobs), so that every workspace.* command is answered. The actor's
// stop cancels the git work still running (its processes are killed, not
// awaited) and waits only for it to return: a command cut short is
// answered CONFLICT, and what it left on disk is settled by the next
// start's reconciliation, as after a crash.
func (d *Daemon) stopWorkspaces(bound time.Duration) {
	if d.workspaces == nil {
		return
	}
	detached := make(chan struct{})
	d.sys.Root.Send(d.registry, &registry.DetachWorkspaces{Done: detached})
	waitClosed(detached, bound)
	_ = d.sys.Root.StopFuture(d.workspaces).Wait()
}

// drainAll stops every runtime. Forced, it kills them and waits up to
// shutdown.timeout. Graceful, it lets active turns finish for up to
// shutdown.timeout, then kills what is left, waiting up to the kill
// graces; it kills at once when Shutdown(true) is called meanwhile.
func (d *Daemon) drainAll(force bool) {
	if force {
		d.drain(true, d.cfg.Shutdown.Timeout)
		return
	}
	done := make(chan struct{})
	d.sys.Root.Send(d.registry, &registry.Drain{Done: done})
	t := time.NewTimer(d.cfg.Shutdown.Timeout)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
		d.log.Warn("graceful shutdown timed out; killing runtimes")
	case <-d.forced:
		d.log.Warn("shutdown forced; killing runtimes")
	}
	// A forced drain escalates the one in progress (see registry.Drain).
	d.drain(true, d.cfg.Kill.AbortGrace+d.cfg.Kill.TermGrace)
}

func (d *Daemon) drain(force bool, bound time.Duration) bool {
	done := make(chan struct{})
	d.sys.Root.Send(d.registry, &registry.Drain{Force: force, Done: done})
	return waitClosed(done, bound)
}

// waitClosed waits for done to close, for at most bound, and reports
// whether it did.
func waitClosed(done <-chan struct{}, bound time.Duration) bool {
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// stopActors stops the actor tree (the coordinator first, see stopJobs),
// then waits for the goroutines the actors started, which may still be
// committing to the store.
func (d *Daemon) stopActors() {
	if d.sys == nil {
		return
	}
	if d.team != nil {
		_ = d.sys.Root.StopFuture(d.team).Wait()
	}
	if d.workspaces != nil {
		_ = d.sys.Root.StopFuture(d.workspaces).Wait()
	}
	if d.jobs != nil {
		_ = d.sys.Root.StopFuture(d.jobs).Wait()
	}
	if d.registry != nil {
		_ = d.sys.Root.StopFuture(d.registry).Wait()
	}
	d.sys.Shutdown()
	d.mailboxes.Close()
	// The agent actors are stopped, and with them their runtime actors,
	// which kill their child on the way out: the goroutines waiting for a
	// child or reading its output end (within the proc drain bound).
	d.group.Close()
	d.logs.Close()
}

// The mailbox pool's settings. A mailbox yields its goroutine after 300
// messages, as protoactor's default dispatcher. At most 32 goroutines stay
// parked between runs: enough for the runs a 2-core daemon has going at
// once, and few enough that a burst (a thousand agents starting) leaves no
// thousand parked stacks behind. A parked goroutine ends after a second
// without a run, so a daemon at rest keeps none.
const (
	mailboxThroughput = 300
	mailboxesParked   = 32
	mailboxLinger     = time.Second
)

// writeDiscovery writes daemon.json atomically (a temporary file renamed
// over it), so a client never reads half of it.
func (d *Daemon) writeDiscovery() error {
	b, err := json.Marshal(discovery{
		PID: os.Getpid(), Version: d.opts.Version, ProtocolVersion: protocol.Version,
		WebURL: d.WebURL(), Socket: d.cfg.SocketPath(), AgentCraftURL: d.agentCraftURL(),
	})
	if err != nil {
		return err
	}
	tmp := d.cfg.DiscoveryPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.cfg.DiscoveryPath())
}

// storeTracker records an agent's runtime processes in the store.
type storeTracker struct {
	st      *store.Store
	agentID string
	log     *slog.Logger
}

func (t storeTracker) Started(epoch int64, pid, pgid int, start uint64) {
	if err := t.st.PutRuntime(store.RuntimeProc{AgentID: t.agentID, Epoch: epoch, PID: pid, PGID: pgid, StartTime: start}); err != nil {
		t.log.Error("record runtime process", "agent_id", t.agentID, "err", err)
	}
}

func (t storeTracker) Exited(epoch int64) {
	if err := t.st.DeleteRuntime(t.agentID, epoch); err != nil {
		t.log.Error("forget runtime process", "agent_id", t.agentID, "err", err)
	}
}

// splitList splits a comma-separated setting, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// minLevel drops records below min (protoactor logs dead letters at Info).
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(a), min: h.min}
}

func (h minLevel) WithGroup(n string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(n), min: h.min}
}
