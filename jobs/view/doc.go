// Package view holds the pure projections of subagent job records: run
// state transitions, the derived job state, the wire snapshots, the
// operator view and alias normalization. It imports no actor code, so the
// daemon's jobs package and shardctl's offline forensics share one
// definition of what a job looks like.
package view
