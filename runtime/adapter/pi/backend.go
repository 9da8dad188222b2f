// Package pi is the adapter backend for pi's RPC mode (`pi --mode rpc`,
// JSONL commands and events on stdio, split on LF only): prompt and abort,
// message_update text/thinking deltas, tool_execution_start/end as tool
// calls, agent_end as the end of the turn with the last assistant
// message's stop reason and usage. pi has no permission prompts of its
// own: the adapter loads a small extension of its own (gate.go) that asks
// before every tool call through pi's extension UI sub-protocol, and the
// adapter turns each question into the Host's permission_request. pi has
// no modes, and its models are not offered (UNSUPPORTED). Sessions are
// pi's own (its command line decides: --no-session, --continue).
package pi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/shard-dev/shard/internal/xsync"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/adapter"
)

// Options configure a Backend.
type Options struct {
	Command []string
	Cwd     string
	Env     []string
	Stderr  io.Writer
	// StartTimeout bounds the first get_state. 0: 30s.
	StartTimeout time.Duration
	Log          *slog.Logger
	// Trace, when set, receives every line pi wrote (tests record
	// transcripts with it; the daemon never sets it: lines carry prompts).
	Trace io.Writer
}

// Backend is a pi agent in RPC mode as an adapter.Backend; the agent is
// the adapter's child in its process group and dies with it.
type Backend struct {
	opts Options
	ev   adapter.Events

	*adapter.Proc // the agent's process: Done, Err, Close

	stdin   io.WriteCloser
	gateDir string     // the gate extension's temporary directory
	wmu     sync.Mutex // serialises stdin writes

	// life is cancelled by Close, and when pi exits; the backend's own
	// goroutines (a gate question, an abort being sent) run under it.
	life context.Context
	stop context.CancelFunc
	// calls owns those goroutines; Close closes it once pi is gone.
	calls xsync.Group

	mu      sync.Mutex // guards the following
	n       int
	waiting map[string]chan response
	turn    chan adapter.TurnResult   // the turn in flight; nil: none
	last    adapter.TurnResult        // of the latest assistant message
	args    map[string]map[string]any // of the tool calls not yet ended, by id
}

type response struct {
	Success bool            `json:"success"`
	Error   string          `json:"error"`
	Data    json.RawMessage `json:"data"`
}

// New returns a Backend that Start will start.
func New(opts Options) *Backend {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 30 * time.Second
	}
	life, stop := context.WithCancel(context.Background())
	return &Backend{opts: opts, waiting: map[string]chan response{}, args: map[string]map[string]any{}, Proc: adapter.NewProc(),
		life: life, stop: stop}
}

// Start implements adapter.Backend: pi prints nothing until asked, so the
// first get_state answer is its readiness.
func (b *Backend) Start(ctx context.Context, ev adapter.Events) (adapter.Offer, error) {
	if len(b.opts.Command) == 0 {
		return adapter.Offer{}, errors.New("pi: no agent command")
	}
	b.ev = ev
	gate, gateDir, err := writeGate()
	if err != nil {
		return adapter.Offer{}, fmt.Errorf("pi: the permission gate: %w", err)
	}
	// --extension loads the gate even under --no-extensions (which only
	// turns discovery off).
	args := append(append([]string(nil), b.opts.Command[1:]...), "--extension", gate)
	stdin, stdout, err := b.Proc.Start(append([]string{b.opts.Command[0]}, args...), b.opts.Cwd, b.opts.Env, b.opts.Stderr)
	if err != nil {
		_ = os.RemoveAll(gateDir)
		return adapter.Offer{}, fmt.Errorf("pi: %w", err)
	}
	b.stdin, b.gateDir = stdin, gateDir
	// The Proc owns the reader: its last act is Exited, and Close waits
	// for Done.
	go b.read(stdout)
	sctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	st, err := b.call(sctx, map[string]any{"type": "get_state"})
	if err != nil {
		return adapter.Offer{}, fmt.Errorf("pi: get_state: %w", err)
	}
	return adapter.Offer{Images: takesImages(st.Data)}, nil
}

// takesImages reads get_state's model: pi's Model lists its input kinds
// ("text", "image"). pi has no model switch here, so the model it starts
// with is the one every prompt goes to; no model, or one without "image",
// takes no images.
func takesImages(state json.RawMessage) bool {
	var s struct {
		Model *struct {
			Input []string `json:"input"`
		} `json:"model"`
	}
	if json.Unmarshal(state, &s) != nil || s.Model == nil {
		return false
	}
	return slices.Contains(s.Model.Input, "image")
}

// call sends a command and waits for its response.
func (b *Backend) call(ctx context.Context, cmd map[string]any) (response, error) {
	b.mu.Lock()
	b.n++
	id := "a-" + strconv.Itoa(b.n)
	ch := make(chan response, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	cmd["id"] = id
	if err := b.send(cmd); err != nil {
		return response{}, err
	}
	select {
	case r := <-ch:
		if !r.Success {
			return r, errors.New("pi refused " + fmt.Sprint(cmd["type"]) + ": " + r.Error)
		}
		return r, nil
	case <-b.Done():
		return response{}, fmt.Errorf("the agent exited: %w", b.Err())
	case <-ctx.Done():
		return response{}, ctx.Err()
	}
}

func (b *Backend) send(cmd map[string]any) error {
	line, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	_, err = b.stdin.Write(append(line, '\n'))
	return err
}

// read handles pi's stdout until EOF, then waits for the process.
func (b *Backend) read(stdout io.Reader) {
	rd := bufio.NewReaderSize(stdout, 256<<10)
	for {
		line, err := rd.ReadBytes('\n') // LF only, as pi frames
		if len(line) > 0 {
			if b.opts.Trace != nil {
				_, _ = b.opts.Trace.Write(line)
			}
			b.handle(line)
		}
		if err != nil {
			break
		}
	}
	b.Exited(func() {
		b.stop() // nobody is left to answer a gate question or an abort
		_ = os.RemoveAll(b.gateDir)
	})
}

// event is the part of a pi event the adapter reads.
type event struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Command string `json:"command"`
	Method  string `json:"method"` // extension_ui_request
	Title   string `json:"title"`
	response
	AssistantMessageEvent *struct {
		Type  string `json:"type"`
		Delta string `json:"delta"`
	} `json:"assistantMessageEvent"`
	Message *struct {
		Role       string `json:"role"`
		StopReason string `json:"stopReason"`
		Usage      *struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
		} `json:"usage"`
	} `json:"message"`
	ToolCallID string         `json:"toolCallId"`
	ToolName   string         `json:"toolName"`
	Args       map[string]any `json:"args"`
	IsError    bool           `json:"isError"`
	Result     *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

func (b *Backend) handle(line []byte) {
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil || ev.Type == "" {
		b.ev.ProtocolError(fmt.Sprintf("a %d-byte line that is not a pi RPC record", len(line)))
		return
	}
	switch ev.Type {
	case "response":
		b.mu.Lock()
		ch := b.waiting[ev.ID]
		delete(b.waiting, ev.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- ev.response
		}
	case "extension_ui_request":
		b.uiRequest(uiRequest{ID: ev.ID, Method: ev.Method, Title: ev.Title})
	case "message_update":
		if a := ev.AssistantMessageEvent; a != nil {
			switch a.Type {
			case "text_delta":
				b.ev.Text(a.Delta)
			case "thinking_delta":
				b.ev.Thinking(a.Delta)
			}
		}
	case "message_end":
		if m := ev.Message; m != nil && m.Role == "assistant" {
			b.mu.Lock()
			b.last.StopReason = stopReason(m.StopReason)
			if m.Usage != nil {
				u := protocol.Usage{Input: m.Usage.Input, Output: m.Usage.Output}
				if b.last.Usage != nil {
					u.Input += b.last.Usage.Input
					u.Output += b.last.Usage.Output
				}
				b.last.Usage = &u
			}
			b.mu.Unlock()
		}
	case "tool_execution_start":
		b.mu.Lock()
		b.args[ev.ToolCallID] = ev.Args
		b.mu.Unlock()
		// Pending: the gate asks before the tool runs; its allow moves
		// the call to in_progress (so a client sees the request first, as
		// with ACP agents).
		b.ev.ToolCall(adapter.Tool{ID: ev.ToolCallID, Name: ev.ToolName, Title: ev.ToolName, Args: ev.Args,
			ReadOnly: readOnly(ev.ToolName), Status: adapter.ToolPending})
	case "tool_execution_end":
		// pi's end carries no args; a call the gate refused is announced
		// only now, with the args of its start.
		b.mu.Lock()
		args := b.args[ev.ToolCallID]
		delete(b.args, ev.ToolCallID)
		b.mu.Unlock()
		tc := adapter.Tool{ID: ev.ToolCallID, Name: ev.ToolName, Title: ev.ToolName, Args: args, Status: adapter.ToolCompleted}
		if ev.IsError {
			tc.Status = adapter.ToolFailed
		}
		if ev.Result != nil {
			for _, c := range ev.Result.Content {
				tc.Output += c.Text
			}
		}
		b.ev.ToolCall(tc)
	case "agent_end":
		b.mu.Lock()
		ch, res := b.turn, b.last
		b.turn, b.last = nil, adapter.TurnResult{}
		b.mu.Unlock()
		if ch != nil {
			ch <- res
		}
	}
}

// stopReason maps pi's stop reasons to ACP's, which turn_end carries.
func stopReason(s string) string {
	switch s {
	case "stop", "toolUse":
		return adapter.StopEndTurn
	case "aborted":
		return adapter.StopCancelled
	case "length":
		return "max_tokens"
	}
	return s
}

func readOnly(tool string) bool {
	switch tool {
	case "read", "ls", "grep", "find":
		return true
	}
	return false
}

// Prompt implements adapter.Backend: prompt, then the events until
// agent_end.
//
// Images go in pi's own shape, ImageContent {type, data, mimeType}.
func (b *Backend) Prompt(ctx context.Context, text string, images []protocol.Image) (adapter.TurnResult, error) {
	ch := make(chan adapter.TurnResult, 1)
	b.mu.Lock()
	b.turn, b.last = ch, adapter.TurnResult{}
	b.mu.Unlock()
	cmd := map[string]any{"type": "prompt", "message": text}
	if len(images) > 0 {
		ims := make([]map[string]string, len(images))
		for i, im := range images {
			ims[i] = map[string]string{"type": "image", "data": im.Data, "mimeType": im.MimeType}
		}
		cmd["images"] = ims
	}
	if _, err := b.call(ctx, cmd); err != nil {
		b.mu.Lock()
		b.turn = nil
		b.mu.Unlock()
		return adapter.TurnResult{}, err
	}
	select {
	case res := <-ch:
		return res, nil
	case <-b.Done():
		return adapter.TurnResult{}, fmt.Errorf("the agent exited mid-turn: %w", b.Err())
	}
}

// abortTimeout bounds pi's answer to abort.
const abortTimeout = 10 * time.Second

// Cancel implements adapter.Backend (pi's abort), sent from a goroutine of
// the backend: the Host calls Cancel holding its lock. Once Close began
// there is no turn left to abort.
func (b *Backend) Cancel() {
	b.calls.Go(func() {
		ctx, cancel := context.WithTimeout(b.life, abortTimeout)
		defer cancel()
		if _, err := b.call(ctx, map[string]any{"type": "abort"}); err != nil {
			b.opts.Log.Warn("pi abort", "err", err)
		}
	})
}

// Close implements adapter.Backend: what waits for pi gives up, pi is
// stopped, and Close waits for the backend's goroutines.
func (b *Backend) Close() error {
	b.stop()
	err := b.Proc.Close()
	b.calls.Close()
	return err
}

// SetMode implements adapter.Backend: pi has no modes.
func (b *Backend) SetMode(context.Context, string) error { return adapter.ErrUnsupported }

// SetModel implements adapter.Backend: not offered.
func (b *Backend) SetModel(context.Context, string) error { return adapter.ErrUnsupported }
