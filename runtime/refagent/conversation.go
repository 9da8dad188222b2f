package refagent

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// Roles of live-window messages.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// conversation is the live window (the messages after the latest
// compaction) with what goes with it, and the session transcript that
// backs it (store). Its compaction methods are in compaction.go, its
// session_op list and fork in sessionop.go.
//
// runtime.mu protects every field; the methods ending in Locked must be
// called with it held. A message is written to the transcript with the
// lock held, so lines reach the file in the order the window changed, and
// the window is announced (message_complete, tool_result, compaction,
// turn_end) in the same critical section as it changes. The lock is never
// held across the store's fsync (runtime.awaitDurable; see session).
type conversation struct {
	out       *output // reports failed transcript writes
	log       *slog.Logger
	ids       *idGen
	store     *session
	sessionID string // Options.SessionID, or else the session directory's name

	window []protocol.Message
	// meta holds the thinking signatures of live-window blocks, for
	// providers that need them back (Anthropic), and the exit codes of tool
	// results (bash), which the model sees as text (forModelLocked).
	meta windowMeta
	// compactionIndex is the latest compaction's index (0: none) and
	// summaryID the id of its summary, window[0].
	compactionIndex int
	summaryID       string
	// lastContext is the context_tokens the last provider call reported
	// (0 after a compaction): a real provider's count includes the system
	// prompt and tools, which the window estimate does not. reported says
	// whether to believe it (a real provider; the sim's count is the
	// estimate).
	lastContext int64
	reported    bool
}

// appendLocked adds a message to the live window and writes it to the
// transcript; the entry is on disk once awaitDurable(ticket) returned.
func (c *conversation) appendLocked(m protocol.Message) writeTicket {
	c.window = append(c.window, m)
	return c.persistLocked(m)
}

// persistLocked writes the live-window message m, with its meta, to the
// transcript and returns the ticket to pass to runtime.awaitDurable, which
// the caller calls after releasing runtime.mu and before it announces
// anything that depends on the entry. A failed write is logged and
// reported with a non-fatal error event: the message stays in the live
// window but would be missing after a restart.
func (c *conversation) persistLocked(m protocol.Message) writeTicket {
	t, err := c.store.write(c.meta.entryFor(m, time.Now()))
	if err != nil {
		c.persistFailedLocked(err)
	}
	return t
}

// persistFailedLocked reports a transcript write or sync that failed.
func (c *conversation) persistFailedLocked(err error) {
	c.log.Error("session append failed", slog.Any("err", err))
	c.out.emit(protocol.ErrorEvent{Header: protocol.Header{Type: protocol.TypeError}, Code: protocol.CodeInternal,
		Message: "the session transcript could not be written; this message will be missing after a restart"})
}

// writeAnswerLocked records the thinking signatures of the assistant
// message msg (by block index) and writes msg to the transcript. The
// message enters the window only once durable (addLocked), so get_sync never
// shows it before its message_complete.
func (c *conversation) writeAnswerLocked(msg protocol.Message, sigs map[int]provider.Signature) writeTicket {
	for i, sig := range sigs {
		c.meta.sigs[provider.BlockRef{MessageID: msg.ID, Index: i}] = sig
	}
	return c.persistLocked(msg)
}

// addLocked adds a message already written to the transcript to the live
// window.
func (c *conversation) addLocked(m protocol.Message) {
	c.window = append(c.window, m)
}

// reportContextLocked records the context_tokens a provider call reported.
func (c *conversation) reportContextLocked(n int64) {
	c.lastContext = n
}

// toolBatch is the user message collecting one assistant message's tool
// results; idx is its position in the live window once it exists.
type toolBatch struct {
	msgID string
	idx   int
}

// addResultLocked adds a tool_result block to the batch's window message,
// creating the message on the first result. exitCode, when set, is kept
// as meta (the model sees it as text; the event's content stays the
// output).
func (c *conversation) addResultLocked(b *toolBatch, block protocol.ContentBlock, exitCode *int) {
	if exitCode != nil {
		c.meta.exitCodes[block.ToolCallID] = *exitCode
	}
	if b.idx < 0 {
		c.window = append(c.window, protocol.Message{ID: b.msgID, Role: roleUser, Content: []protocol.ContentBlock{block}})
		b.idx = len(c.window) - 1
		return
	}
	c.window[b.idx].Content = append(c.window[b.idx].Content, block)
}

// persistBatchLocked writes the batch's message, once complete, to the
// transcript; the zero ticket when the batch has no result.
func (c *conversation) persistBatchLocked(b *toolBatch) writeTicket {
	if b.idx < 0 {
		return writeTicket{}
	}
	return c.persistLocked(c.window[b.idx])
}

// messagesLocked returns the window for encoding (never nil).
func (c *conversation) messagesLocked() []protocol.Message {
	if c.window == nil {
		return []protocol.Message{}
	}
	return c.window
}

// liveLocked is the live window of sync and get_sync.
func (c *conversation) liveLocked() protocol.LiveWindow {
	lw := protocol.LiveWindow{Messages: c.messagesLocked()}
	if c.compactionIndex > 0 {
		idx := c.compactionIndex
		lw.CompactionIndex = &idx
	}
	return lw
}

// forModelLocked is m as the model sees it: a tool result with an exit code
// (bash) carries it as "[exit code: N]" text after the output
// (docs/protocol.md §9.4: the event's content stays the pure output).
func (c *conversation) forModelLocked(m protocol.Message) protocol.Message {
	return c.meta.forModel(m)
}

// modelViewLocked is the whole window as the model sees it, with the
// signatures the provider needs back: a copy, safe to use without the
// lock.
func (c *conversation) modelViewLocked() ([]protocol.Message, map[provider.BlockRef]provider.Signature) {
	msgs := make([]protocol.Message, len(c.window))
	for i, m := range c.window {
		msgs[i] = c.forModelLocked(m)
	}
	return msgs, maps.Clone(c.meta.sigs)
}

// contextTokensLocked estimates the context the next provider call sends.
func (c *conversation) contextTokensLocked() int64 {
	n := tokens(windowBytes(c.window))
	if c.reported {
		n = max(n, c.lastContext)
	}
	return n
}

// forModel is m as the model sees it (conversation.forModelLocked).
func (wm windowMeta) forModel(m protocol.Message) protocol.Message {
	if m.Role != roleUser || len(wm.exitCodes) == 0 {
		return m
	}
	var content []protocol.ContentBlock
	for i, b := range m.Content {
		code, ok := wm.exitCodes[b.ToolCallID]
		if b.Type != protocol.BlockToolResult || !ok || b.Content == nil {
			continue
		}
		if content == nil {
			content = slices.Clone(m.Content)
		}
		c := *b.Content
		note := fmt.Sprintf("[exit code: %d]", code)
		switch c.Kind {
		case "error":
			c.Message = joinNote(c.Message, note)
		default:
			c.Text = joinNote(c.Text, note)
		}
		content[i].Content = &c
	}
	if content != nil {
		m.Content = content
	}
	return m
}

func joinNote(text, note string) string {
	if text == "" {
		return note
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text + note
}
