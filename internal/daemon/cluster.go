package daemon

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shard-dev/shard/cluster"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/protocol"
)

// clusterConfig maps the cluster.* settings to the cluster package's
// Config and checks it there (names, addresses, the rule that a
// non-loopback address needs a token and TLS), so that a bad setting
// fails the daemon's start before anything in its home changes. ok is
// false when no cluster.* setting is set: a single shardd.
func clusterConfig(cfg *config.Config, version string) (cc cluster.Config, ok bool, err error) {
	c := cfg.Cluster
	if !c.Enabled() {
		return cluster.Config{}, false, nil
	}
	if c.Node == "" {
		// Named here rather than by cluster's own check, which would quote
		// the empty name.
		return cluster.Config{}, false, fmt.Errorf("daemon: %w: cluster.node: required when any cluster.* setting is set", cluster.ErrInvalidConfig)
	}
	cc = cluster.Config{
		Node: c.Node, Listen: c.Listen, Advertise: c.Advertise, ClientListen: c.ClientListen,
		Routes: slices.Clone(c.Routes), Token: c.Token, TLSCert: c.TLSCert, TLSKey: c.TLSKey, TLSCA: c.TLSCA,
		Home: cfg.Home, StoreDir: c.StoreDir, Replicas: c.Replicas, Lease: c.Lease,
		URL: c.URL, NKeySeedFile: c.NKeySeedFile, Version: version,
		Capacity: cluster.Capacity{MaxActiveRuns: cfg.Jobs.MaxActive},
	}.WithDefaults()
	if err := cc.Validate(); err != nil {
		// cluster's messages name the setting and never quote the token.
		return cluster.Config{}, false, fmt.Errorf("daemon: %w", err)
	}
	return cc, true, nil
}

// startCluster starts this daemon's cluster node: it waits for a quorum
// of the cluster (bounded by the node's ready timeout), so the daemon
// serves no client before it is a member.
func (d *Daemon) startCluster(cc cluster.Config) error {
	log := d.log.With("component", "cluster")
	// The directory's goroutines and the interruptions of lost nodes'
	// runs end with this context (stopDirectory).
	ctx, cancel := context.WithCancel(context.Background())
	d.dir.cancel = cancel
	d.clusterRunsDeps()
	cc.Hooks = cluster.Hooks{
		Load: func() cluster.Load {
			agents, runtimes, runs := d.metrics.Load()
			// The runs claimed from other nodes' jobs count here too.
			return cluster.Load{Agents: agents, ActiveAgents: runtimes, ActiveRuns: runs + d.runs.running()}
		},
		// Declaring a node dead is where its unfinished runs become
		// interrupted (as after a restart, docs/protocol.md §10.3): this
		// node, the one survivor that declared it, writes them interrupted
		// in their records, once; each run's parent's node follows its
		// record and reports it once (jobs/anywhere.go).
		OnNodeDead: func(node string, inc uint64) {
			log.Warn(fmt.Sprintf("cluster: node %s (incarnation %d) declared dead by %s", node, inc, cc.Node),
				"dead_node", node, "incarnation", inc)
			d.dir.wg.Go(func() { d.remoteRuns.InterruptNode(ctx, node, inc) })
		},
		// A rejoin reconciles as a restarted daemon does; this daemon
		// already did at its start (jobs.Reconcile) for its own jobs; the
		// runs it claimed in its previous incarnation are interrupted
		// (once across the cluster) by its runner (clusterruns.go).
		OnRejoin: func(r cluster.Rejoin) {
			d.rejoinRuns(r)
			log.Info(fmt.Sprintf("cluster: node %s rejoins as incarnation %d (incarnation %d declared dead by %s)",
				cc.Node, r.Incarnation, r.Previous, r.DeclaredBy),
				"previous", r.Previous, "incarnation", r.Incarnation, "declared_by", r.DeclaredBy)
		},
		RouteBound: func(a *net.TCPAddr) {
			log.Info("cluster: routes bound", "route_addr", a.String())
			if d.opts.ClusterRouteBound != nil {
				d.opts.ClusterRouteBound(a.String())
			}
		},
	}
	n, err := cluster.Start(context.Background(), cc, d.log) // it adds component=cluster itself
	if err != nil {
		cancel()
		return fmt.Errorf("daemon: start cluster node %s: %w", cc.Node, err)
	}
	d.node = n
	alive := 0
	for _, m := range n.Members() {
		if m.Health != cluster.HealthDead {
			alive++
		}
	}
	log.Info(fmt.Sprintf("cluster: node %s joined (%d members)", n.Name(), alive),
		"incarnation", n.Incarnation(), "members", alive)
	if url := n.ClientURL(); url != "" {
		log.Info("cluster: NATS clients at "+url, "client_url", url)
	}
	d.startDirectory(ctx)
	d.startEvents(ctx)
	d.startRuns()
	return nil
}

// clusterStatus answers cluster.status from the node's membership table
// (nil: a single shardd, enabled:false).
func (d *Daemon) clusterStatus() protocol.ClusterStatusData {
	n := d.node
	if n == nil {
		return protocol.ClusterStatusData{}
	}
	st := protocol.ClusterStatusData{Enabled: true, Node: n.Name(), Nodes: []protocol.ClusterNode{}}
	for _, m := range n.Members() {
		st.Nodes = append(st.Nodes, protocol.ClusterNode{
			Node: m.Node, Incarnation: m.Incarnation, Health: protocol.NodeHealth(m.Health),
			StartedAt: m.StartedAt.UnixMilli(), HeartbeatAt: m.HeartbeatAt.UnixMilli(),
			Load:     protocol.NodeLoad{Agents: m.Load.Agents, Runtimes: m.Load.ActiveAgents, Runs: m.Load.ActiveRuns},
			Capacity: m.Capacity.MaxActiveRuns, Version: m.Version, Self: m.Node == n.Name(),
			Socket: m.Addrs.Socket, WebURL: m.Addrs.Web,
		})
	}
	slices.SortFunc(st.Nodes, func(a, b protocol.ClusterNode) int { return strings.Compare(a.Node, b.Node) })
	return st
}

// publishAddrs tells the cluster where this daemon takes clients, once
// its gateway listens (the web port may be picked then): its socket and
// the URL browsers reach it at. A client whose node dies fails over
// through another node's (cluster.status).
func (d *Daemon) publishAddrs() {
	if d.node == nil {
		return
	}
	sock, err := filepath.Abs(d.cfg.SocketPath())
	if err != nil {
		sock = "" // unreachable by path: no cwd
	}
	d.node.SetAddrs(cluster.Addrs{Socket: sock, Web: d.gw.BrowserURL()})
}

// closeCluster stops the node after the gateway closed: it says no
// goodbye, so the others declare this incarnation dead after its lease,
// as after a crash.
func (d *Daemon) closeCluster() {
	if d.node == nil {
		return
	}
	if d.uplinkLn != nil {
		d.uplinkLn.Close()
	}
	d.stopRuns()
	d.stopDirectory()
	_ = d.node.Close()
	d.log.Info("cluster: node stopped", "node", d.node.Name())
}

// CheckCluster reports what is wrong with cfg's cluster.* settings, as
// New would: cmd/shardd calls it before it makes the home and its log,
// so that a refused setting changes nothing on disk.
func CheckCluster(cfg *config.Config) error {
	_, _, err := clusterConfig(cfg, "")
	return err
}
