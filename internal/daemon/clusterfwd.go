package daemon

import (
	"context"
	"fmt"
	"net"

	"github.com/shard-dev/shard/cluster"
	"github.com/shard-dev/shard/cluster/tunnel"
	"github.com/shard-dev/shard/gateway"
)

// gatewaySubject is the NATS subject a node's gateway takes the other
// nodes' forwarded connections on (cluster/tunnel). Only members reach
// it: every NATS connection of the cluster is authenticated by the
// cluster's token (or nkey).
func gatewaySubject(node string) string { return "shard.gw." + node }

// gatewayCluster is what the gateway needs of this node to forward a
// client's commands for another node's agents (gateway.Cluster): the
// agent directory, the membership and tunnel dials on the node's NATS
// connection.
type gatewayCluster struct{ d *Daemon }

// Node implements gateway.Cluster.
func (g gatewayCluster) Node() string { return g.d.node.Name() }

// AgentNode implements gateway.Cluster.
func (g gatewayCluster) AgentNode(id string) (string, bool) {
	node, ok := g.d.dir.NodeOf(id)
	if !ok || node == "" || node == g.d.node.Name() {
		return "", false
	}
	return node, true
}

// NodeHealth implements gateway.Cluster.
func (g gatewayCluster) NodeHealth(node string) (string, bool) {
	for _, m := range g.d.node.Members() {
		if m.Node == node {
			if m.Health == cluster.HealthDead {
				return gateway.HealthDead, true
			}
			return string(m.Health), true
		}
	}
	return "", false
}

// Nodes implements gateway.Cluster.
func (g gatewayCluster) Nodes() []string {
	var out []string
	for _, m := range g.d.node.Members() {
		if m.Node != g.d.node.Name() {
			out = append(out, m.Node)
		}
	}
	return out
}

// Dial implements gateway.Cluster.
func (g gatewayCluster) Dial(ctx context.Context, node string) (net.Conn, error) {
	c, err := tunnel.Dial(ctx, g.d.node.Conn(), gatewaySubject(node), tunnel.Options{})
	if err != nil {
		return nil, fmt.Errorf("daemon: dial node %s: %w", node, err)
	}
	return c, nil
}

// gatewayClusterDeps is the gateway's Cluster: nil on a single shardd.
func (d *Daemon) gatewayClusterDeps() gateway.Cluster {
	if d.node == nil {
		return nil
	}
	return gatewayCluster{d: d}
}

// serveTunnel lets the other nodes reach this node's gateway: a tunnel
// listener on its subject, served by the gateway (gateway.ServeTunnel),
// closed when the gateway stops accepting.
func (d *Daemon) serveTunnel() error {
	if d.node == nil {
		return nil
	}
	ln, err := tunnel.Listen(d.node.Conn(), gatewaySubject(d.node.Name()), tunnel.Options{})
	if err != nil {
		return fmt.Errorf("daemon: listen for the cluster's forwarded connections: %w", err)
	}
	d.gw.ServeTunnel(ln)
	return nil
}
