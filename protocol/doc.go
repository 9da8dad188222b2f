// Package protocol holds the Shard wire protocol: typed messages for every
// command and event of the per-agent and orchestrator layers, the error-code
// registry, the JSONL codec used on stdio and unix sockets, and the grammar
// of the WebSocket handshake headers (handshake.go: Host, Origin,
// Sec-WebSocket-Protocol, bearer credentials, forwarded headers), parsed in
// their canonical spelling only so that two strings never name one host.
//
// It is a leaf: it imports nothing from the rest of Shard, from protoactor,
// bbolt or viper, so that clients (shardctl, SDKs, tests) can speak the
// protocol without pulling in the daemon. The shapes mirror the wire
// contract field for field; docs/protocol.md summarizes it in numbered
// sections, and a bare §N in this package's comments is one of them. Where
// the contract leaves a choice open, the choice made is written next to the
// type and collected in docs/protocol.md §13.
package protocol
