package main

import (
	"fmt"
	"strings"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// The transcript as a person reads it: what attach shows of the recent
// turns when it attaches and what logs prints. Messages come from a sync's
// live window (post-compaction): user prompts as "you: …", the assistant's
// text as written, tool calls as "⚙ name target" and their results as
// "↳ ok" or "↳ error: …". Thinking is left out. Everything is escaped for
// the terminal (safeText).

// lastTurns returns the messages of the last n turns (a turn starts at a
// user message); n <= 0 keeps them all.
func lastTurns(msgs []protocol.Message, n int) []protocol.Message {
	if n <= 0 {
		return msgs
	}
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			seen++
			if seen == n {
				return msgs[i:]
			}
		}
	}
	return msgs
}

// transcriptLines renders messages as lines.
func transcriptLines(msgs []protocol.Message, p palette) []string {
	var out []string
	for _, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case protocol.BlockText:
				text := strings.TrimRight(safeText(b.Text), "\n")
				if text == "" {
					continue
				}
				if m.Role == "user" {
					first := true
					for l := range strings.SplitSeq(text, "\n") {
						if first {
							out = append(out, p.bold("you: "+l))
							first = false
						} else {
							out = append(out, p.bold("     "+l))
						}
					}
					continue
				}
				out = append(out, strings.Split(text, "\n")...)
			case protocol.BlockImage:
				// An image is named, not shown: its type, size and the
				// start of its hash (get_image fetches it).
				out = append(out, p.bold("you: ")+p.dim(imageLabel(b)))
			case protocol.BlockToolCall:
				out = append(out, p.dim("⚙ "+strings.TrimSpace(safe(b.Name)+" "+safe(toolTarget(b.Args)))))
			case protocol.BlockToolResult:
				r := &protocol.ToolResult{IsError: b.IsError}
				if b.Content != nil {
					r.Content = *b.Content
				}
				line := "↳ " + safe(resultSummary(r))
				if b.IsError {
					out = append(out, p.red(line))
				} else {
					out = append(out, p.dim(line))
				}
			}
		}
	}
	return out
}

// recentTurns is how many turns attach shows when it attaches.
const recentTurns = 3

// showRecent prints the last turns of the first sync of an attach.
func (s *attachSession) showRecent(m *protocol.Sync) {
	msgs := lastTurns(m.LiveWindow.Messages, recentTurns)
	if len(msgs) == 0 {
		return
	}
	s.scr.line(s.p.dim(fmt.Sprintf("— the last %d of %d messages —", len(msgs), len(m.LiveWindow.Messages))))
	for _, l := range transcriptLines(msgs, s.p) {
		s.scr.line(l)
	}
	if midTurn(m.Status) {
		s.scr.line(s.p.dim("— a turn is in flight; it goes on below —"))
	} else {
		s.scr.line(s.p.dim("— now —"))
	}
}

// showMissed prints, at the sync of a reconnect (docs/protocol.md §6.4),
// what the agent did while this attach was away: the live window's
// messages after the last one shown, less the tool results shown live.
// When that message is no longer in the window (compacted), the last
// turns are shown, as at a first attach.
func (s *attachSession) showMissed(m *protocol.Sync) {
	msgs, found := client.MessagesAfter(m.LiveWindow.Messages, s.seen.lastMsg)
	if !found {
		msgs = lastTurns(m.LiveWindow.Messages, recentTurns)
	}
	msgs = s.seen.unseen(msgs)
	if len(msgs) == 0 {
		return
	}
	s.scr.endText()
	s.scr.line(s.p.dim(fmt.Sprintf("— while reconnecting: %d messages —", len(msgs))))
	for _, l := range transcriptLines(msgs, s.p) {
		s.scr.line(l)
	}
	if midTurn(m.Status) {
		s.scr.line(s.p.dim("— a turn is in flight; it goes on below —"))
	} else {
		s.scr.line(s.p.dim("— now —"))
	}
}

// imageLabel names an image block: "[image image/png, 12.3 KiB, 1a2b3c4d]".
func imageLabel(b protocol.ContentBlock) string {
	sha := safe(b.SHA256)
	if len(sha) > 8 {
		sha = sha[:8]
	}
	return fmt.Sprintf("[image %s, %s, %s]", safe(b.MimeType), sizeLabel(b.Size), sha)
}

// sizeLabel is a byte count for people.
func sizeLabel(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
