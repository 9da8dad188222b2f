// Package ids mints the identifiers Shard hands out for its durable records:
// agents, sessions, jobs and runs.
//
// An id is a short type prefix, a dash and a lowercase ULID, for example
// "agent-01j9z7k3m2x4q8r6t0v5w1y3b7". The prefix lets a human (and a log
// grep) tell an agent id from a job id at a glance; the ULID makes ids unique
// without coordination and sorts them by creation time, so bbolt keys and
// listings come out in creation order. Beyond the prefix, ids are opaque:
// nothing may parse meaning out of the ULID part.
package ids
