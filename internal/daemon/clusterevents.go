package daemon

import (
	"context"

	"github.com/shard-dev/shard/cluster/events"
	"github.com/shard-dev/shard/internal/outbox"
)

// eventsDeps makes d.events and d.listeners when clustered and returns the
// jobs coordinator's RunEvents (the relay's PublishRun); nil (no events
// code at all) on a single shardd. The relay starts with the node
// (startEvents); run changes handed over before wait for it.
func (d *Daemon) eventsDeps() func(rec []byte) {
	if !d.clustered {
		return nil
	}
	d.listeners = events.NewListeners()
	d.events = events.NewRelay(events.Options{Node: d.cluster.Node, Hub: d.hub, Listeners: d.listeners,
		Logger: d.log.With("component", "cluster")})
	return d.events.PublishRun
}

// startEvents starts the relay of the jobs' and workspaces' events
// between this node's clients and the other nodes' (docs/protocol.md §13
// "Events of other nodes") on the node's connection, until ctx ends (the
// directory's context: stopDirectory waits for it). A relay that cannot
// subscribe is logged: the clients then see the other nodes' changes at
// their next list, as the docs say for lost events.
func (d *Daemon) startEvents(ctx context.Context) {
	if err := d.events.Start(ctx, d.node.Conn()); err != nil {
		d.log.Error("cluster: the other nodes' job and workspace events will not reach this node's clients",
			"component", "cluster", "err", err)
	}
	d.dir.wg.Go(func() { <-d.events.Done() })
}

// SpeakFor implements gateway.Cluster.
func (g gatewayCluster) SpeakFor(parent string, out *outbox.Outbox) {
	g.d.listeners.Listen(parent, out)
}

// Forget implements gateway.Cluster.
func (g gatewayCluster) Forget(out *outbox.Outbox) { g.d.listeners.Forget(out) }
