// Package supervisor holds Shard's supervision policy as pure,
// clock-free types: how a runtime is stopped (abort → graceful → kill
// escalation), when an idle runtime is reaped (docs/protocol.md §6.4),
// and the protoactor supervision deciders for each actor family.
//
// Actors apply these policies; keeping the decisions here, free of timers
// and processes, lets them be tested as tables and keeps one authority per
// failure domain.
package supervisor
