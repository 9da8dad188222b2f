package main

import (
	"fmt"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// Lengths of summarized text.
const (
	summaryText = 80 // quoted text deltas and messages
	summaryWord = 40 // titles, reasons, details
)

// summarize describes an event in a few words for watch: statuses, turn and
// request ids, tool names and quoted text deltas — never tool arguments,
// tool output or permission inputs.
func summarize(msg protocol.Typed) string {
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	switch m := msg.(type) {
	case *protocol.Sync:
		add("status=%s mode=%s messages=%d pending=%d", m.Status, orDash(m.Mode), len(m.LiveWindow.Messages), len(m.PendingRequests))
		if m.RuntimeEpoch != nil {
			add("epoch=%d", *m.RuntimeEpoch)
		}
	case *protocol.Status:
		add("%s", m.Status)
		if m.Detail != "" {
			add("%s", truncate(m.Detail, summaryWord))
		}
	case *protocol.TurnStart:
		add("%s", m.TurnID)
	case *protocol.TurnEnd:
		add("%s", m.TurnID)
		if m.Usage != nil {
			add("in=%d out=%d", m.Usage.Input, m.Usage.Output)
		}
	case *protocol.MessageDelta:
		switch m.Kind {
		case protocol.DeltaText, protocol.DeltaThinking:
			add("%s %s", m.Kind, quote(m.TextDelta, summaryText))
		case protocol.DeltaToolCall:
			if m.Name != "" {
				add("tool_call %s", m.Name)
			} else {
				add("tool_call +%d bytes", len(m.ArgsDelta))
			}
		default:
			add("%s", m.Kind)
		}
	case *protocol.MessageComplete:
		add("%s %s blocks=%d", m.MessageID, m.Message.Role, len(m.Message.Content))
	case *protocol.ToolCall:
		add("%s", m.Name)
		if m.ReadOnly != nil && *m.ReadOnly {
			add("(read-only)")
		}
	case *protocol.ToolResult:
		if m.IsError {
			add("error")
		} else {
			add("ok")
		}
		if m.ExitCode != nil {
			add("exit=%d", *m.ExitCode)
		}
		if m.DurationMs != nil {
			add("%dms", *m.DurationMs)
		}
	case *protocol.UsageEvent:
		add("in=%d out=%d", m.Input, m.Output)
		if m.ContextTokens > 0 {
			add("context=%d", m.ContextTokens)
		}
		if m.Model != "" {
			add("model=%s", m.Model)
		}
	case *protocol.Compaction:
		add("#%d %d→%d tokens", m.Index, m.TokensBefore, m.TokensAfter)
	case *protocol.ErrorEvent:
		add("%s: %s", m.Code, truncate(m.Message, summaryText))
		if m.Fatal {
			add("(fatal)")
		}
	case *protocol.PermissionRequest:
		add("%s %s", m.RequestID, m.ToolName)
	case *protocol.PermissionResolved:
		add("%s %s", m.RequestID, orDash(firstNonEmpty(m.Decision, m.ChoiceID)))
		if m.Source != "" {
			add("by %s", m.Source)
		}
	case *protocol.UIRequest:
		add("%s %s", m.RequestID, m.Kind)
		if m.Title != "" {
			add("%s", quote(m.Title, summaryWord))
		}
	case *protocol.UIResolved:
		add("%s", m.RequestID)
		if m.Source != "" {
			add("by %s", m.Source)
		}
	case *protocol.ModelChanged:
		add("%s → %s", orDash(m.Previous.ID), orDash(m.Active.ID))
	case *protocol.ModeChanged:
		add("%s → %s", orDash(m.PreviousMode), m.Mode)
	case *protocol.ReasoningLevelChanged:
		add("%s → %s", orDash(m.Previous), m.Active)
	case *protocol.AgentSpawned:
		add("%s", agentName(m.Info))
		if m.Info.ParentAgentID != "" {
			add("parent=%s", m.Info.ParentAgentID)
		}
	case *protocol.AgentUpdated:
		add("%s", agentName(m.Info))
	case *protocol.AgentExited:
		add("%s", m.RuntimeState)
		if m.ExitCode != nil {
			add("exit=%d", *m.ExitCode)
		}
		if m.Reason != "" {
			add("%s", truncate(m.Reason, summaryWord))
		}
	case *protocol.AgentStatusChanged:
		add("%s runtime=%s", m.Status, m.RuntimeState)
	case *protocol.AgentActivity:
		add("%s %s", m.Phase, m.Status)
		if m.ToolName != "" {
			add("%s", m.ToolName)
		}
	case *protocol.SubagentRunChanged:
		add("%s %s→%s", m.RunID, orDash(string(m.PreviousState)), m.State)
	case *protocol.Response:
		add("%s %s", m.Command, m.ID)
		if m.Success {
			add("ok")
		} else if m.Error != nil {
			add("%s: %s", m.Error.Code, truncate(m.Error.Message, summaryWord))
		}
	}
	return strings.Join(parts, " ")
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
