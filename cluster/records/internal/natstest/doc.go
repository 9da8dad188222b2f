// Package natstest starts real in-process NATS JetStream clusters for the
// tests of package cluster/records: every listener on 127.0.0.1 with a
// random port, every store in a test's temporary directory, and every
// server with sync_interval "always", the setting the record layer needs
// (an acknowledged write is on disk on a majority). Routes go through
// the loopback relays of cluster/clustertest, whose ports are known
// before any server starts: every server is given its whole route list
// up front and its routes are never reloaded.
//
// Partitions are made by cutting those relays (Isolate), so a server's
// clients stay connected to a server that cannot reach a quorum.
//
// Waiting is on the servers' own state (ready for connections, a
// JetStream meta-leader with every peer, a stream leader, replicas
// current): the servers publish no event a test could block on before it
// subscribed, so Wait polls that state on a short ticker until it holds
// or a generous bound passes, and fails the test then.
package natstest
