// Package natstest starts real in-process NATS JetStream clusters for the
// tests of package cluster/records: every listener on 127.0.0.1 with a
// random port, every store in a test's temporary directory, and every
// server with sync_interval "always", the setting the record layer needs
// (an acknowledged write is on disk on a majority). It follows the
// pattern nats-server's own tests use for in-process clusters, with
// random route ports: the first server starts alone and each next one
// routes to those already up; gossip completes the mesh.
//
// Waiting is on the servers' own state (ready for connections, a
// JetStream meta-leader with every peer, a stream leader): the servers
// publish no event a test could block on before it subscribed, so Wait
// polls that state on a short ticker until it holds or a generous bound
// passes, and fails the test then.
package natstest
