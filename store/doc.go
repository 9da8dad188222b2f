// Package store keeps Shard's durable records in one bbolt file
// (<home>/shard.db): the facts that must survive a daemon restart, such as
// Agent manifests, behind domain methods that commit before they return.
//
// It is the only package that imports bbolt. Records are JSON values in
// named buckets; every method runs in one bbolt transaction and copies what
// it reads out before the transaction ends, so callers never hold memory
// that bbolt may unmap. Writes are group-committed (commit.go): writes
// issued while a commit is in flight share the next transaction, so many
// concurrent writers pay for one fsync, and each still returns only once
// its own write is durable. A "meta" bucket carries the schema version: Open
// writes it into a new file and refuses a file written by a newer build.
//
// Jobs are indexed in buckets written in the transactions that write them
// (open jobs, a parent's jobs, a run's job, an agent's runs, idempotency
// keys, alias bindings by alias), so the jobs coordinator, which holds only
// unfinished jobs in memory, reads any other one by key (jobindex.go).
//
// The security records (security.go: principals, enrolled browsers,
// browser sessions, API credentials) hold SHA-256 hashes and metadata only;
// no raw cookie, token, code or ticket is ever written.
//
// Open takes bbolt's exclusive file lock and waits at most Options.Timeout
// for it, so a second shardd on the same home fails fast with ErrLocked
// instead of hanging.
package store
