// Package wire holds the AgentCraft v1 dialect that Shard will serve on its
// own WebSocket endpoint, beside (never inside) the Shard wire protocol: the
// enums, the entities and every message of both directions, a strict decoder
// for what clients send and an encoder that produces exactly the shapes the
// dialect's clients (the AgentCraft mod, CLI tools) expect.
//
// docs/agentcraft.md summarizes the dialect as implemented and lists the
// choices made where it is open; each choice is also written next to the
// field or function it concerns.
//
// The shapes follow the dialect field for field:
//
//   - every message is one JSON object {"v": 1, "type": "<type>", "id"?, ...payload};
//     the message types here hold the payload, and their MarshalJSON adds v and type;
//   - a required field is a Go field without omitempty and is always encoded (a
//     required list is [] when empty, never null); an optional field has omitempty
//     (or is a pointer where its zero value means something) and is omitted when
//     unset, never null;
//   - receivers ignore unknown fields, so the decoders do too, but they match
//     field names exactly (encoding/json alone would also accept "TEXT" for "text").
//
// The package is a leaf like protocol: it imports nothing of Shard, so a test
// client or a tool can speak the dialect without the daemon.
package wire
