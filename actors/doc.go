// Package actors is the root of Shard's actor families. Each subpackage owns
// one kind of actor and its messages:
//
//	registry  the agent registry: durable identities, routing, lifecycle commands
//	agent     one actor per Agent: attachments, fan-out, pending requests, status
//	proc      one actor per Runtime generation: owns the child OS process
//
// Arrows point one way: actors import protocol, store, supervisor and the
// neutral leaves under internal/ (outbox, clock, xsync), never the gateway,
// the jobs subsystem or the composition root (internal/depsrules/deps_test.go).
//
// The tree and the ownership rules are described in ARCHITECTURE.md.
package actors
