// Package client speaks the Shard wire protocol to a running daemon, over its
// unix socket (JSONL) or its WebSocket endpoint.
//
// It exists so that every Go consumer of the daemon — shardctl, the
// integration tests, and later SDKs — shares one implementation of the
// connection rules that are easy to get subtly wrong: waiting for hello,
// correlating a response with its command by id while events stream in
// between, and shutting the reader down without leaking goroutines. Message
// shapes are not defined here; they all come from package protocol.
//
// A Conn is a thin multiplexer: Request sends a typed command and waits for
// the response carrying the same id, and everything else the daemon sends
// (events, and responses nobody waits for) is delivered, in arrival order, on
// the Events channel.
package client
