// Package tools holds the reference Runtime's built-in tools: read, ls,
// grep and find (read-only) and write, edit and bash (mutating), each with
// the JSON schema the model sees (docs/protocol.md §9.4, §11).
//
// The package is self-contained: it knows nothing of providers, the
// permission gate or the protocol stream. A runtime drives one call as
//
//	tool, ok := tools.Lookup(name)          // unknown name → the runtime's error
//	if err := tool.Check(args); err != nil { // bad args → tool error, no permission asked
//		return tools.ErrorResult(err.Error())
//	}
//	if !tool.ReadOnly {
//		prompt, details := tool.Ask(env, args) // permission_request (§9.5)
//		// … wait for the gate …
//	}
//	render := tool.Preview(env, args) // tool_call render, may be nil
//	res := tool.Run(ctx, env, args)   // tool_result content, is_error, exit_code, render
//
// # Paths
//
// Every path argument is resolved against Env.Cwd (absolute paths are kept,
// a leading "~/" is the user's home) and cleaned. Paths shown to the model
// and in render descriptors are relative to Env.Cwd when the file lies
// under it, absolute otherwise.
//
// # Output limits
//
// No tool returns more than Env.MaxOutput bytes of text. Longer output is cut
// and a marker says how much went missing, for example "[… truncated 123456
// bytes (1234 lines) …]" (docs/protocol.md §2.3); read adds the offset to
// continue from, and bash keeps the head and the tail of the output, dropping
// the middle.
//
// # bash
//
// bash runs `/bin/bash -c command` in Env.Cwd, in a process group of its
// own, with stdin from /dev/null and stdout and stderr combined. When the
// call's context is cancelled (abort) or its timeout expires, the whole
// group receives SIGTERM and, after a short grace, SIGKILL. Processes the
// command leaves running in its group (a backgrounded `sleep 60 &`) are
// ended the same way when the shell exits; a process that must outlive the
// call has to leave the group itself (setsid).
//
// # Concurrency
//
// Tools hold no state: a Tool value and its functions may be used from
// any number of goroutines at once. Run returns only after every goroutine
// and process it started has ended.
package tools
