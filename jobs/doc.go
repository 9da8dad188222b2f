// Package jobs will hold the subagent job coordinator and job actors: the
// run state machine, strategies, waiters, aliases and completion delivery
// (spec §10.3, §11.2). Until it lands the daemon answers subagent.* commands
// with INVALID_REQUEST ("not supported by this daemon yet").
package jobs
