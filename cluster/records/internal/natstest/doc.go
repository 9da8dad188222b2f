// Package natstest starts real in-process NATS JetStream clusters for the
// tests of package cluster/records: every listener on 127.0.0.1 with a
// random port, every store in a test's temporary directory, and every
// server with sync_interval "always", the setting the record layer needs
// (an acknowledged write is on disk on a majority). Route ports are
// random too, so no server knows the others' before they start: each
// routes to those already up (the first to a placeholder), and once all
// are up every server is given a route to every other.
//
// Partitions are made without a proxy: Isolate removes a server's routes
// and makes it require route credentials no other server has, so its
// clients stay connected to a server that cannot reach a quorum.
//
// Waiting is on the servers' own state (ready for connections, a
// JetStream meta-leader with every peer, a stream leader, replicas
// current): the servers publish no event a test could block on before it
// subscribed, so Wait polls that state on a short ticker until it holds
// or a generous bound passes, and fails the test then.
package natstest
