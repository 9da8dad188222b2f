// Package cluster is the node foundation of a Shard cluster: each shardd
// embeds a NATS server with JetStream (or connects to an existing NATS
// cluster), and the nodes keep a replicated membership table in which a
// node that stops heartbeating past its lease is declared dead exactly
// once, by exactly one survivor.
//
// Why NATS JetStream and not a home-made consensus: replicated key-value
// buckets with compare-and-set (KV Create succeeds only when a key is
// absent, Update only at the expected revision) give the "declared once
// by one" rule for free, and a write needs a quorum, so the minority side
// of a partition cannot declare anything.
//
// # Settings
//
// The daemon starts a node when any of the cluster.* keys of its
// configuration is set (flags, SHARD_CLUSTER_* environment such as
// SHARD_CLUSTER_TOKEN, the config file's cluster: section), one per field
// of [Config]; the keys are snake_case (cluster.client_listen) and their
// flags, as every shardd flag, write '_' as '-' (--cluster.client-listen):
//
//	--cluster.node n1                         Config.Node (required; [a-zA-Z0-9_-], ≤ 64)
//	--cluster.listen 127.0.0.1:6250           Config.Listen (NATS routes between nodes)
//	--cluster.advertise host:port             Config.Advertise (optional: NAT, proxies)
//	--cluster.client-listen 127.0.0.1:4222    Config.ClientListen (optional NATS clients)
//	--cluster.routes nats://127.0.0.1:6251,nats://127.0.0.1:6252
//	                                          Config.Routes (the other nodes;
//	                                          at least one)
//	--cluster.token …                         Config.Token (route and client auth;
//	                                          better SHARD_CLUSTER_TOKEN than a flag)
//	--cluster.tls-cert, --cluster.tls-key, --cluster.tls-ca
//	                                          Config.TLSCert, TLSKey, TLSCA
//	--cluster.store-dir                       Config.StoreDir (default <home>/cluster/jetstream)
//	--cluster.replicas 3                      Config.Replicas
//	--cluster.lease 15s                       Config.Lease
//	--cluster.url nats://…                    Config.URL (use an existing NATS cluster)
//	--cluster.nkey-seed-file …                Config.NKeySeedFile (the cluster's user
//	                                          nkey: URL-mode auth; embedded, the
//	                                          only key client_listen takes)
//
// No cluster.* setting means no cluster: a single shardd stays what it is
// (bbolt, zero configuration).
//
// There is no cluster of one: an embedded node needs the route of at
// least one other node, and [Config.Validate] refuses it otherwise. NATS
// runs a clustered JetStream only with configured routes, and a route
// list naming only the node itself does not help: the meta group then
// expects two peers and never elects a leader. A cluster starts with
// its first majority (two of three nodes up).
//
// # Security
//
// [Config.Validate] refuses a node that would listen on, or route to, an
// address that is not loopback without a token, and without TLS: a
// cluster's routes carry every record and command, so a non-loopback
// cluster is authenticated and encrypted or it does not start. Routes
// authenticate with the token (NATS routes take a user and password,
// never an nkey); clients of cluster.client_listen with the token, or
// only with the nkey of cluster.nkey_seed_file when it is set.
//
// # Membership
//
// Each node writes its [Record] into the replicated bucket shard_nodes
// (key node.<name>) every lease/3. Every node watches the bucket; a node
// whose record has not changed for longer than its lease is dead, and
// the survivors race to create the key dead.<name>.<incarnation>: the one
// whose create succeeds runs Hooks.OnNodeDead, once in the whole cluster
// for that incarnation. A node that starts again takes the next
// incarnation; when it finds its previous one, it claims that
// incarnation's dead key itself if no survivor did, so the previous
// incarnation is reconciled once, and runs Hooks.OnRejoin. A node that
// learns its running incarnation was declared dead (it was slow, or cut
// off and healed) moves to the next incarnation and runs OnRejoin too:
// once the others treat its work as interrupted it must not carry on.
//
// A name is one process's: each record carries the instance of the home
// that wrote it (a random id kept in the store directory). A node that
// starts and finds its name's record from another instance, not
// declared dead, watches it for one lease: a heartbeat means another
// process runs the name, and Start fails with [ErrDuplicateNode]; an
// embedded server fails sooner, when a live server of its name refuses
// its route. The first heartbeat is a compare-and-set on the record it
// judged, so of two processes starting at once under one name, one wins.
//
// # A stale view judges no one
//
// A node judges the others only on a current view of the bucket. Its
// watch can stall while the others heartbeat on: when the node holding
// the bucket's stream leader dies, nats.go's ordered consumer notices
// only after two missed idle heartbeats (about ten seconds), and every
// record looks silent meanwhile. The watch delivers the bucket in
// order, so a node's own heartbeat coming back through its watch (its
// echo) shows it has seen everything written before that heartbeat.
// The rule:
//
//   - While a node's latest echo is older than lease/2, or a restarted
//     watch is still replaying the bucket, its view is stale: it
//     declares no one dead, and reports a silent node as suspect at
//     worst (dead only when a dead.<node>.<incarnation> key exists).
//   - When an acknowledged heartbeat has not come back for lease/3 (or
//     nothing came back for a whole lease), the node stops its watch and
//     starts a new one, which replays every key's latest value, instead
//     of waiting for the library to notice.
//   - Before it declares a node dead, it reads that node's record from
//     the stream leader (STREAM.MSG.GET; a direct get may be answered
//     by a lagging replica): a newer record than the watch brought
//     counts as a heartbeat seen now.
//   - A silence counts from when the view last became current at the
//     earliest. While the stream has no leader no node's heartbeat is
//     taken, and the first node whose own heartbeat comes back must not
//     judge the others, whose retries land a moment later, by the
//     outage; a node really gone stays silent a lease after and is
//     declared then.
//
// A node cut off from the quorum gets no echo either, so the minority
// side of a partition does not even try to declare the others.
//
// Tests run clusters on loopback through package clustertest's relays,
// which also cut a node off for partition tests.
package cluster
