package daemon

import (
	"context"
	"fmt"
	"net"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/actors/uplink"
	"github.com/shard-dev/shard/cluster"
	"github.com/shard-dev/shard/cluster/tunnel"
	"github.com/shard-dev/shard/supervisor"
)

// uplinkSubject is the NATS subject a node takes the other nodes' links
// on, each carrying their children's permission and UI requests to this
// node's agents (actors/uplink). Only members reach it, as the gateway's.
func uplinkSubject(node string) string { return "shard.up." + node }

// startUplink spawns the uplink (a child's requests to an ancestor on
// another node, docs/protocol.md §13 "Runs on other nodes"), hands it to
// the registry, and listens for the other nodes' links. Called once the
// node joined, before the gateway serves.
func (d *Daemon) startUplink() error {
	node := d.node
	deps := uplink.Deps{
		Registry: d.registry,
		Node:     node.Name(),
		Located:  d.dir.learn,
		Dial: func(ctx context.Context, to string) (net.Conn, error) {
			for _, m := range node.Members() {
				if m.Node == to && m.Health == cluster.HealthDead {
					return nil, fmt.Errorf("daemon: node %s is dead", to)
				}
			}
			return tunnel.Dial(ctx, node.Conn(), uplinkSubject(to), tunnel.Options{})
		},
		Group:      d.group,
		Logger:     d.log.With("component", "uplink"),
		Dispatcher: d.mailboxes,
	}
	pid, err := d.sys.Root.SpawnNamed(uplink.Props(deps).Configure(actor.WithGuardian(supervisor.StopOnFailure())), "uplink")
	if err != nil {
		return fmt.Errorf("daemon: spawn uplink: %w", err)
	}
	ln, err := tunnel.Listen(node.Conn(), uplinkSubject(node.Name()), tunnel.Options{})
	if err != nil {
		d.sys.Root.Stop(pid)
		return fmt.Errorf("daemon: listen for the cluster's uplinks: %w", err)
	}
	d.uplinkLn = ln
	d.sys.Root.Send(d.registry, &registry.AttachUplink{PID: pid})
	uplink.Serve(d.sys, pid, ln, d.group, deps.Logger)
	return nil
}
