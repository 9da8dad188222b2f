// Package actors is the root of Shard's actor families. Each subpackage owns
// one kind of actor and its messages:
//
//	registry  the agent registry: durable identities, routing, lifecycle commands
//	agent     one actor per Agent: attachments, fan-out, pending requests, status
//	runtime   one actor per Runtime generation: the child process
//
// The tree and the ownership rules are described in ARCHITECTURE.md.
package actors
