package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shard-dev/shard/actors/agent"
	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/cluster"
	"github.com/shard-dev/shard/cluster/agentdir"
	"github.com/shard-dev/shard/cluster/records"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/internal/procs"
	"github.com/shard-dev/shard/jobs/remote"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
	"github.com/shard-dev/shard/workspaces/git"
)

// directory is a clustered daemon's part of the agent directory
// (docs/cluster.md "The agent directory"): a publisher of this node's
// agents, a view of the others', and the follower of the daemon's
// broadcasts that tells the publisher what changed. All of it runs on
// goroutines of its own, started once the node joined and stopped before
// it closes; the registry reads the view through dir (registry.Directory),
// which answers "nothing remote" until the view exists.
type directory struct {
	view   atomic.Pointer[agentdir.View]
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex // protects learned and order
	// learned is where agents of other nodes live as this node was told
	// before its view may list them (learn): a claimed run's parent, a
	// child whose request came up a link. An agent never moves node, so
	// a learned node stays true; the oldest go past maxLearned.
	learned map[string]string
	order   []string
}

// maxLearned bounds the learned nodes: one per parent whose runs this
// node took and per child whose requests reached it, since its start.
const maxLearned = 4096

// learn notes that node hosts agent id (another node), for NodeOf while
// the view does not list it yet.
func (dir *directory) learn(id, node string) {
	if id == "" || node == "" {
		return
	}
	dir.mu.Lock()
	defer dir.mu.Unlock()
	if dir.learned == nil {
		dir.learned = map[string]string{}
	}
	if _, ok := dir.learned[id]; !ok {
		dir.order = append(dir.order, id)
	}
	dir.learned[id] = node
	if len(dir.order) > maxLearned {
		delete(dir.learned, dir.order[0])
		dir.order = dir.order[1:]
	}
}

// NodeOf implements registry.Directory: the view's word first (it is
// the host's own), else the learned one.
func (dir *directory) NodeOf(id string) (string, bool) {
	if in, ok := dir.Lookup(id); ok && in.Node != "" {
		return in.Node, true
	}
	dir.mu.Lock()
	defer dir.mu.Unlock()
	node, ok := dir.learned[id]
	return node, ok
}

// Remote implements registry.Directory.
func (dir *directory) Remote() []protocol.AgentInfo {
	if v := dir.view.Load(); v != nil {
		return v.Remote()
	}
	return nil
}

// Lookup implements registry.Directory.
func (dir *directory) Lookup(id string) (protocol.AgentInfo, bool) {
	if v := dir.view.Load(); v != nil {
		return v.Lookup(id)
	}
	return protocol.AgentInfo{}, false
}

// directoryClientID is the client id of the publisher's requests to the
// registry: outside the gateway's counter, which starts at 1.
const directoryClientID = math.MaxUint64 - 1

// startDirectory opens the directory bucket (retrying while the cluster
// has no quorum) and starts the publisher, the view and the broadcast
// follower. It returns at once: the daemon never waits on the cluster.
func (d *Daemon) startDirectory(ctx context.Context) {
	log := d.log.With("component", "cluster")
	dir := d.dir
	dir.wg.Go(func() {
		var rec *records.Records
		wait := agentdir.DefaultRetry
		for {
			var err error
			rec, err = records.Open(ctx, d.node.JetStream(), records.Options{Replicas: d.cluster.Replicas})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			log.Warn("cluster: agent directory not open; retrying", "retry_in", wait.String(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, agentdir.DefaultMaxRetry)
		}
		// The same records carry the runs any node may take (jobs/remote).
		d.remoteRuns.SetRecords(rec)
		// This node's jobs it no longer holds leave the records (a refused
		// create's held records, a job its retention removed).
		dir.wg.Go(func() { d.remoteRuns.Sweep(ctx, d.holdsJob) })
		view := agentdir.NewView(d.node.Name(), rec.Agents, log)
		// Another node's agent changing is told to this node's clients as
		// its own agents' changes are (docs/protocol.md §13 "Agents of
		// other nodes"): agent_spawned, agent_updated with the entry's
		// fields, agent_removed.
		view.Notify(func(ev agentdir.Event) {
			h := protocol.Header{AgentID: ev.Info.AgentID}
			switch ev.Kind {
			case agentdir.Added:
				h.Type = protocol.TypeAgentSpawned
				d.hub.Broadcast(protocol.MustMarshal(protocol.AgentSpawned{Header: h, Info: ev.Info}))
			case agentdir.Updated:
				h.Type = protocol.TypeAgentUpdated
				d.hub.Broadcast(protocol.MustMarshal(protocol.AgentUpdated{Header: h, Info: ev.Info}))
			case agentdir.Removed:
				h.Type = protocol.TypeAgentRemoved
				d.hub.Broadcast(protocol.MustMarshal(protocol.AgentRemoved{Header: h}))
			}
		})
		dir.view.Store(view)
		dir.wg.Go(func() { view.Run(ctx) })
		pub := agentdir.NewPublisher(agentdir.PublisherOptions{
			Node: d.node.Name(), Table: rec.Agents, Source: registrySource{d: d}, Logger: log,
		})
		dir.wg.Go(func() { pub.Run(ctx) })
		d.followAgents(ctx, pub)
	})
}

// stopDirectory stops what startDirectory started (and the interruptions
// of lost nodes' runs under way) and waits for it.
func (d *Daemon) stopDirectory() {
	if d.dir == nil || d.dir.cancel == nil {
		return
	}
	d.dir.cancel()
	d.dir.wg.Wait()
}

// followAgents reads the daemon's broadcasts as a connection would (an
// outbox in the hub) and marks each agent an agent-level event names
// changed; the publisher reads and writes it later, once per burst. A
// follower that fell behind (its outbox overflowed) joins again and asks
// for a full reconciliation: it may have missed a change.
func (d *Daemon) followAgents(ctx context.Context, pub *agentdir.Publisher) {
	for ctx.Err() == nil {
		out := outbox.New(outbox.Limits{})
		d.hub.Add(out)
		pub.Resync()
		for {
			recs, ok := out.Next(ctx)
			if !ok {
				break
			}
			for _, rec := range recs {
				var h struct {
					Type    string `json:"type"`
					AgentID string `json:"agent_id"`
				}
				if json.Unmarshal(rec, &h) != nil || h.AgentID == "" {
					continue
				}
				if _, remote := d.dir.Lookup(h.AgentID); remote {
					continue // the view's own broadcast of another node's agent
				}
				switch h.Type {
				case protocol.TypeAgentSpawned, protocol.TypeAgentUpdated, protocol.TypeAgentRemoved,
					protocol.TypeAgentStatusChanged, protocol.TypeAgentExited:
					pub.Changed(h.AgentID)
				}
			}
		}
		d.hub.Remove(out)
		out.Close()
	}
}

// registrySource reads this node's agents from its registry, as a client
// would (agent.list limited to this node, agent.status), off every
// mailbox: the registry answers into an outbox this goroutine reads.
type registrySource struct{ d *Daemon }

// sourceTimeout bounds one read of the registry.
const sourceTimeout = 30 * time.Second

func (s registrySource) ask(ctx context.Context, h protocol.Header, cmd protocol.Command) (protocol.AgentListData, error) {
	out := outbox.New(outbox.Limits{})
	defer out.Close()
	h.ID = "agentdir"
	s.d.sys.Root.Send(s.d.registry, &registry.Command{
		Client: &agent.Client{ID: directoryClientID, Out: out, Source: "cluster"},
		Header: h, Cmd: cmd, Local: true,
	})
	ctx, cancel := context.WithTimeout(ctx, sourceTimeout)
	defer cancel()
	for {
		recs, ok := out.Next(ctx)
		if !ok {
			return protocol.AgentListData{}, fmt.Errorf("%w: the registry did not answer %s", protocol.Errorf(protocol.CodeTimeout, "no answer"), h.Type)
		}
		for _, rec := range recs {
			var r protocol.Response
			if err := json.Unmarshal(rec, &r); err != nil || r.Type != protocol.TypeResponse {
				continue
			}
			if r.Error != nil {
				return protocol.AgentListData{}, r.Error
			}
			var data protocol.AgentListData
			if err := json.Unmarshal(r.Data, &data); err != nil {
				return data, fmt.Errorf("daemon: %s answer: %w", h.Type, err)
			}
			return data, nil
		}
	}
}

// All implements agentdir.Source.
func (s registrySource) All(ctx context.Context) ([]protocol.AgentInfo, error) {
	data, err := s.ask(ctx, protocol.Header{Type: protocol.TypeAgentList}, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}})
	return data.Agents, err
}

// One implements agentdir.Source.
func (s registrySource) One(ctx context.Context, id string) (protocol.AgentInfo, bool, error) {
	h := protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}
	data, err := s.ask(ctx, h, &protocol.AgentStatusCmd{Header: h})
	if protocol.CodeOf(err) == protocol.CodeNotFound {
		return protocol.AgentInfo{}, false, nil
	}
	if err != nil {
		return protocol.AgentInfo{}, false, err
	}
	for _, in := range data.Agents {
		if in.AgentID == id && in.Node == s.d.node.Name() {
			return in, true, nil
		}
	}
	return protocol.AgentInfo{}, false, nil
}

// directoryDeps makes d.dir when clustered and returns it as the
// registry's Directory; nil (no directory code at all) on a single shardd.
func (d *Daemon) directoryDeps() registry.Directory {
	if !d.clustered {
		return nil
	}
	d.dir = &directory{}
	return d.dir
}

// runsDeps makes d.remoteRuns when clustered: the jobs coordinator's handle on
// the runs any node may take (jobs/remote), whose records startDirectory
// gives it once they are open. nil on a single shardd.
func (d *Daemon) runsDeps(forks *procs.ForkGate) *remote.Runs {
	if !d.clustered {
		return nil
	}
	d.remoteRuns = remote.New(d.cluster.Node, &git.Exec{Forks: forks}, d.log.With("component", "cluster"))
	// A relaunch of a child on another node is pinned to that node's
	// incarnation, and refused while the node is dead or unknown
	// (docs/protocol.md §13 "Runs on other nodes"). A suspect node is
	// taken at its word: if it is declared dead, the relaunch waiting for
	// it is interrupted with its other runs.
	d.remoteRuns.SetNodes(func(node string) (uint64, bool) {
		if d.node == nil {
			return 0, false
		}
		if node == d.node.Name() {
			return d.node.Incarnation(), true // a child this node claimed
		}
		for _, m := range d.node.Members() {
			if m.Node == node {
				return m.Incarnation, m.Health != cluster.HealthDead
			}
		}
		return 0, false
	})
	return d.remoteRuns
}

// holdsJob reports whether this node's store holds job id (the cluster
// records' sweep asks, jobs/remote.Sweep): false only when the store says
// it has no such job.
func (d *Daemon) holdsJob(id string) (bool, error) {
	_, err := d.store.GetJob(id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
