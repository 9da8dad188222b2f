package daemontool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// Bounds of one call.
const (
	// DialTimeout bounds connecting to the daemon and reading its hello.
	DialTimeout = 5 * time.Second
	// CallTimeout bounds the daemon's answer to every command but a
	// wait, which it gives at once, and is added to a wait's own timeout.
	// A wait without a timeout is bounded by the caller's ctx only.
	CallTimeout = 30 * time.Second
	// maxBoundedWait is the longest wait timeout that also bounds the
	// call; a longer one is left to the daemon and the caller's ctx.
	maxBoundedWait = 24 * time.Hour
)

// Outcome is the answer to one call, shaped for a tool result: either
// Value (the response data) or Failure (the text of a tool error).
type Outcome struct {
	// Value is the response's data decoded as JSON, numbers as
	// json.Number so that ids and epoch milliseconds stay exact; nil for
	// a response without data.
	Value any
	// Failure, when not empty, is the tool error: "<command> failed:
	// <CODE>: <message>" for the daemon's refusal, "<command> aborted"
	// when ctx ended, "<command> failed: <reason>" otherwise.
	Failure string
	// Code is the daemon's refusal's protocol code; "" when it answered,
	// or the call failed otherwise.
	Code protocol.ErrorCode
	// Err is a failure that is neither a refusal nor the caller's abort
	// (the daemon unreachable, an undecodable answer): the caller logs it.
	Err error
}

// Do sends cmd to the daemon at socket and shapes its answer. ctx ending
// aborts the call and closes the connection, which ends a pending wait at
// the daemon (the jobs go on).
func Do(ctx context.Context, socket string, cmd protocol.Command) Outcome {
	typ := cmd.Head().Type
	data, err := Call(ctx, socket, cmd)
	var pe *protocol.Error
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return Outcome{Failure: typ + " aborted"}
	case errors.As(err, &pe):
		return Outcome{Failure: fmt.Sprintf("%s failed: %s: %s", typ, pe.Code, pe.Message), Code: pe.Code}
	default:
		return Outcome{Failure: fmt.Sprintf("%s failed: %v", typ, err), Err: err}
	}
	var value any
	if len(data) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&value); err != nil {
			return Outcome{Failure: fmt.Sprintf("%s: undecodable response data: %v", typ, err), Err: err}
		}
	}
	return Outcome{Value: value}
}

// Call dials the daemon at socket, sends cmd, returns the response data
// and closes the connection. A response with success false is returned as
// its *protocol.Error.
func Call(ctx context.Context, socket string, cmd protocol.Command) (json.RawMessage, error) {
	dialCtx, cancelDial := context.WithTimeout(ctx, DialTimeout)
	conn, err := client.Dial(dialCtx, socket)
	cancelDial()
	if err != nil {
		return nil, fmt.Errorf("reach the daemon: %w", err)
	}
	// The daemon also sends this connection the parent's
	// subagent_run_changed events and the team's; nobody reads them, but
	// they must be drained so that the response is never stuck behind a
	// full buffer.
	var drain sync.WaitGroup
	drain.Go(func() {
		for range conn.Events() {
		}
	})
	defer func() {
		_ = conn.Close() // ends Events, and a pending wait at the daemon
		drain.Wait()
	}()

	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if bound := answerBound(cmd); bound > 0 {
		callCtx, cancel = context.WithTimeout(ctx, bound)
	}
	defer cancel()
	resp, err := conn.Request(callCtx, cmd)
	if err != nil {
		return nil, err
	}
	return resp.Data, nil
}

// answerBound is how long the daemon may take to answer cmd; 0 means no
// bound (a wait without a timeout, or with one too long to matter).
func answerBound(cmd protocol.Command) time.Duration {
	w, ok := cmd.(*protocol.SubagentWait)
	switch {
	case !ok:
		return CallTimeout
	case w.Timeout == nil || *w.Timeout > maxBoundedWait.Seconds():
		return 0
	}
	return time.Duration(*w.Timeout*float64(time.Second)) + CallTimeout
}
