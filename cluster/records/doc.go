// Package records is the cluster's replicated record layer: the agent
// directory, subagent jobs and runs, parent-scoped aliases and the claim
// queue of runs any node may take, each a NATS JetStream KV bucket
// replicated on three servers (docs/cluster.md). It is a foundation the
// daemon does not use yet: a single shardd keeps its records in store
// (bbolt) and needs none of this.
//
// Every write is a compare-and-set on the key's revision, decided by the
// bucket's stream leader: Create only when the key is free, Update and
// Delete only on the revision the caller read. Among writers on any nodes
// exactly one wins each revision; the others get ErrConflict (protocol
// code CONFLICT) and decide again on what is there now. Claiming a run
// and declaring a lost node's runs interrupted are such compare-and-sets,
// which is what makes them once-only across the cluster (claim.go).
//
// Records are JSON in a versioned envelope (codec.go); the decoder refuses
// an unknown version, an unknown field, a record of another kind and bad
// bytes, so no node acts on or rewrites a record it did not understand.
//
// What the layer assumes of the servers, and why: three replicas, because
// a write needs a majority and a two-replica bucket stops when either
// server is lost; sync_interval "always", because a server acknowledges a
// write it has not fsynced otherwise, and two such servers losing power
// lose an acknowledged write. A write whose acknowledgement is lost is
// retried under the same message id, which the stream deduplicates, so a
// retry never stores twice nor reads its own success as a conflict; a
// node without a quorum gets ErrUnavailable (code TIMEOUT) after
// Options.Timeout, never a false success.
//
// Only packages under cluster/ import NATS (internal/depsrules).
package records
