// Package gateway is where clients enter the daemon: the unix socket (JSONL,
// local trust, docs/protocol.md §4.2) and the web listener — the WebSocket
// endpoint `/ws` (one JSON message per text frame, docs/protocol.md §2.2),
// the browser auth endpoints `/enroll` and `/bootstrap`, `/metrics`, and GET
// of any other path handed to Config.Page (the dashboard of package web,
// after the same Host checks) — with the credentials of docs/protocol.md §4.1
// and one connection actor per client.
//
// A connection actor sends `hello` first, decodes every inbound record (a bad
// record gets an INVALID_REQUEST response and the connection stays open),
// hands commands to the registry, and owns the connection's Outbox: a writer
// goroutine drains it to the transport, so nothing in the daemon ever blocks
// on a client. ws.ticket and the security commands (web.enroll,
// web.sessions.*, token.*) are answered by the connection actor itself, and
// only on the unix socket.
//
// In a cluster (Config.Cluster) a third door serves the other nodes
// (ServeTunnel: a cluster/tunnel listener), and a connection forwards its
// commands for another node's agents to that node through an upstream of
// its own (forward.go; docs/protocol.md §13 "Agents of other nodes").
//
// # The web listener
//
// Every request first passes the guard (web.go), whose failures are 400:
// the Host header must name the pinned host exactly, port included (the
// listener's own address in loopback mode, --public-host in remote mode);
// forwarded headers count only from the --trust-proxy peer, and a
// forwarded host must equal the pinned one; in remote mode a request that is
// not https is refused unless --allow-insecure-remote. Every answer carries
// a CSP with frame-ancestors 'none', nosniff and no-referrer.
//
// A WebSocket upgrade is then decided by this table, top to bottom; no
// upgrade happens without a ticket or a token:
//
//	request                                              answer
//	two ticket entries in Sec-WebSocket-Protocol         400
//	Origin present but not in the allowlist (or twice)   400
//	Authorization present, and Origin present            400 (tokens are for non-browser clients)
//	Authorization present, and a ticket too              400
//	Authorization present, no shard.v1                   400
//	Authorization not "Bearer <token68>"                 401
//	token unknown, wrong or revoked                      401
//	token valid                                          101 (closed when the token is revoked)
//	no ticket                                            401
//	ticket, no shard.v1                                  400 (the ticket is not spent)
//	ticket unknown, expired or already used              401
//	ticket bound to an origin, request without Origin    400 (the ticket is spent)
//	ticket bound to another origin (or to none)          401 (the ticket is spent)
//	browser ticket whose session was revoked             401
//	ticket from /bootstrap, its exact Origin             101 (closed when the session is revoked or expires)
//	ticket from ws.ticket, no Origin                     101
//
// GET /enroll serves package web's enrollment page under a CSP that allows
// its inline script and style by hash. POST /enroll exchanges a one-time code
// for a session cookie; it needs an allowed Origin (400), a JSON body (415,
// 413 past 4 KiB), and a live code (401), and is rate-limited per peer (429).
// POST /bootstrap needs an allowed Origin (400), refuses a __Host- Secure
// cookie over plain http (400), and needs exactly one valid session cookie of
// the form for the request's scheme (401); it answers a ticket bound to the
// principal, the session and the Origin.
package gateway
