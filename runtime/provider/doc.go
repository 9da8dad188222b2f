// Package provider is the model-provider layer of Shard's reference agent
// runtime: one Provider interface over real model services, chosen by
// configuration (provider.name, provider.base_url, provider.model and the key
// read from the environment variable named by provider.api_key_env).
//
// Two implementations exist, both built on the services' official Go SDKs:
//
//   - "openai": OpenAI-compatible chat completions
//     (github.com/openai/openai-go/v3). Any compatible server works by base
//     URL: OpenAI itself, vLLM, the llama.cpp server, Ollama, LM Studio. The
//     stream tolerates servers that send no usage, tool-call chunks without
//     ids after the first, whole arguments in one chunk, no ids at all, and
//     reasoning text in a "reasoning_content" or "reasoning" delta field.
//   - "anthropic": the Anthropic Messages API
//     (github.com/anthropics/anthropic-sdk-go/v2) with streaming, tool use,
//     extended/adaptive thinking (signed thinking blocks are sent back) and
//     prompt caching breakpoints.
//
// # Messages
//
// A Request carries the conversation in the wire protocol's own shape
// (protocol.Message, docs/protocol.md §11): user and assistant messages whose
// blocks are text, thinking, tool_call and tool_result; tool results travel
// as user messages. Each provider converts that shape to its service's:
// tool_call blocks become OpenAI tool_calls or Anthropic tool_use blocks,
// tool_result blocks become OpenAI "tool" messages or Anthropic tool_result
// blocks, and thinking blocks go back to Anthropic (with the signature found
// in Request.Signatures) and are dropped for OpenAI.
//
// # Streaming
//
// Stream returns once the service has accepted the request; the answer is
// read with Stream.Next as a sequence of Events, each naming the content block
// it belongs to (Event.Index). Text and thinking arrive as deltas, a tool call
// as one EventToolCallStart followed by EventToolCallArgs fragments whose
// concatenation is the arguments' JSON text. The stream ends with at most one
// EventUsage, exactly one EventStop, and then io.EOF.
//
// # Errors
//
// Every failure, whether Stream's own or one returned by Next, carries the
// protocol code PROVIDER_ERROR (protocol.CodeOf reports it; errors.As finds
// the *protocol.Error). Its message says what went wrong in the words a user
// needs ("rate limited (429)", "HTTP 500 Internal Server Error", "stream
// ended unexpectedly") and never contains the API key. The sentinels of this
// package and the context's cancellation cause stay reachable with errors.Is.
//
// # Concurrency
//
// A Provider holds no mutable state and is safe for concurrent use; each
// Stream call is independent. A Stream's Next must be called from one
// goroutine at a time; Close may be called from any goroutine, also while
// Next is blocked, and aborts the stream. Cancelling the context given to
// Stream aborts the HTTP stream promptly as well.
package provider
