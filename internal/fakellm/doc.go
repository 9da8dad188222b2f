// Package fakellm is the fake model service of Shard's tests: an HTTP
// server on 127.0.0.1 that speaks the real wire formats of OpenAI chat
// completions (POST .../chat/completions), the OpenAI Responses API (POST
// .../responses) and Anthropic Messages (POST .../v1/messages), all as
// server-sent event streams, and records every request it gets.
//
// Tests reach it the way production code reaches a real service: the
// official SDKs in runtime/provider, the reference agent, and the
// third-party agents the adapters run (codex-acp speaks Responses, pi speaks
// chat completions). A test that runs without the network can therefore
// still prove what goes over it.
//
// There are two levels, and one test may mix them:
//
//   - Scripted: Script turns a function from what the model was asked
//     (Prompt) to what it answers (Turn: thinking, text, tool calls, usage,
//     an HTTP error, a hold) into a Handler that answers in the format the
//     request's path names. Reply does the same for a single request.
//   - By hand: a Handler writes the stream itself with SSE and the builders
//     ChatChunk, ChatToolDelta, ChatUsage and Messages, for the streams a
//     real service rarely sends (split fragments, keep-alives, a dropped
//     connection, a missing terminator) that a client must survive.
//
// Start ties a Server to a test: it listens until the test ends.
package fakellm
