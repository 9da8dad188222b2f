// Package clustertest helps tests run a Shard cluster on one machine:
// relays on loopback ports the test owns stand between the nodes, so
// the nodes can listen on port -1 (no fixed port, no port race) and a
// test can cut one node off from the others (a network partition)
// without touching the nodes.
//
// It imports nothing of Shard: the cluster package's own tests and the
// daemon's cluster tests use it alike. Tests of shardd binaries follow
// each node's route address with [Mesh.RouteWatcher] on its stderr.
package clustertest
