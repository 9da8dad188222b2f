// Package runner is a cluster node's side of the runs any node may take
// (docs/cluster.md "Runs on any node"): the claimer, which takes runs off
// the claim queue while this node has room for them, and the executor,
// which carries each claimed run through its record to its end.
//
// Every node runs one Runner, the parent's node included. Its capacity is
// Options.Capacity (jobs.max_active) minus the runs it holds now; it claims
// (records.Claim) when the claim queue changes, when one of its runs ends,
// and once per lease as a safety net, and never more than it has room for.
//
// A claimed run goes, each step a compare-and-set on its record:
//
//	queued (claimed) ──► starting ──► active ──► completed | failed | timed_out | cancelled
//	                         │            │
//	                         └────────────┴──► failed (no worktree, no host, no push)
//
// starting: the node fetches the run's remote into a cache of its own
// (Git: a bare repository under the daemon's home, owner-only) and makes
// the run's work tree, a clone sharing the cache's objects, on the run's
// branch at its base (Git.Prepare); a relaunch pinned to this node
// (records.RunRecord.Host) goes on in its child's work tree instead, made
// again if it is gone (Git.Resume). The Host hosts the child agent there
// (a relaunch: the child it hosts already) and leases it the task. active: the child accepted it; the lease
// is renewed every third of Options.Lease while it runs. The executor
// follows the record: a stop asked by the parent's node (StopRequestedAt)
// stops the lease, the run's timeout ends it timed_out. At the end the
// worktree's changes are committed under Shard's own identity, the branch
// is pushed to the remote, and the terminal record carries the final text,
// usage, error, diff stat and pushed head. Then the work tree goes
// (Git.Release), unless its push failed: its work is nowhere else. A
// cache no run used for Options.CacheIdle, holding no work tree and no
// branch, is removed (Git.Prune, every PruneEvery).
//
// A run whose record stops being this node's (a survivor declared this
// incarnation dead and interrupted it) is given up: its lease is stopped
// and nothing more is written. A daemon that stops writes nothing either:
// its runs are interrupted by whoever declares it dead, or by itself when
// it starts again as a new incarnation (InterruptPrevious), once.
//
// The package knows no daemon: the Host (internal/daemon) hosts agents,
// and the records and git are reached through cluster/records and
// workspaces/git.
package runner
