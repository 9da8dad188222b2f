package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// What attach shows of the answers to its reasoning, compact, fork and
// sessions commands (docs/protocol.md §9.2), and the commands that follow
// from them: /reasoning LEVEL sets the level for the model the listing
// named, /fork forks at the session's last entry (session_op list names
// it) unless told where, and creates the agent that adopts the fork (agent.create with
// its session_id, §10.1), so that there is something to talk to.

// Response data of the commands, as attach reads them.
type (
	reasoningListData struct {
		Model  protocol.ModelDescriptor `json:"model"`
		Levels []struct {
			ID          string `json:"id"`
			Label       string `json:"label"`
			Description string `json:"description"`
		} `json:"levels"`
		Active string `json:"active"`
	}
	reasoningSetData struct {
		Previous string `json:"previous"`
		Active   string `json:"active"`
	}
	compactData struct {
		Compacted    bool   `json:"compacted"`
		Reason       string `json:"reason"`
		TokensBefore int64  `json:"tokens_before"`
		TokensAfter  int64  `json:"tokens_after"`
	}
	forkData struct {
		ForkID    string `json:"fork_id"`
		SessionID string `json:"session_id"`
	}
	sessionsData struct {
		Sessions []struct {
			SessionID       string `json:"session_id"`
			Kind            string `json:"kind"`
			Current         bool   `json:"current"`
			Entries         int    `json:"entries"`
			ForkID          string `json:"fork_id"`
			SourceEntryID   string `json:"source_entry_id"`
			HeadEntryID     string `json:"head_entry_id"`
			Corrupt         bool   `json:"corrupt"`
			CompactionIndex *int   `json:"compaction_index"`
		} `json:"sessions"`
	}
)

// succeeded shows what a successful command answered, where there is more
// to show than its events, and sends what follows from it.
func (s *attachSession) succeeded(r commandResult) {
	decode := func(v any) bool {
		if r.resp == nil || len(r.resp.Data) == 0 {
			return false
		}
		if err := json.Unmarshal(r.resp.Data, v); err != nil {
			s.scr.line(s.p.red(fmt.Sprintf("%s: unreadable answer: %v", r.cmd.Head().Type, err)))
			return false
		}
		safeAll(v)
		return true
	}
	h := func(typ string) protocol.Header { return protocol.Header{Type: typ, AgentID: s.agentID} }
	switch c := r.cmd.(type) {
	case *protocol.ListReasoningLevels:
		effort := s.effort
		s.effort = ""
		var d reasoningListData
		if !decode(&d) {
			return
		}
		if effort != "" {
			s.command(&protocol.SetReasoningLevel{Header: h(protocol.TypeSetReasoningLevel), Model: d.Model.ID, Effort: effort})
			return
		}
		s.scr.line(fmt.Sprintf("reasoning levels of %s (/reasoning LEVEL switches):", orDash(d.Model.ID)))
		for _, l := range d.Levels {
			mark := "  "
			if l.ID == d.Active {
				mark = "* "
			}
			line := mark + l.ID
			if l.Description != "" {
				line += " — " + l.Description
			}
			s.scr.line(line)
		}
	case *protocol.SetReasoningLevel:
		var d reasoningSetData
		if decode(&d) && d.Previous == d.Active {
			s.scr.line(s.p.dim("(reasoning level is " + d.Active + " already)"))
		}
	case *protocol.SessionOp:
		switch c.Op {
		case protocol.SessionOpCompact:
			var d compactData
			if decode(&d) && !d.Compacted {
				s.scr.line(s.p.dim("(nothing to compact: " + orDash(d.Reason) + ")"))
			}
		case protocol.SessionOpFork:
			var d forkData
			if !decode(&d) {
				return
			}
			s.scr.line(s.p.dim(fmt.Sprintf("(forked into session %s; creating an agent on it…)", d.SessionID)))
			// In the same directory, on the same runtime, model and mode.
			s.command(&protocol.AgentCreate{Header: protocol.Header{Type: protocol.TypeAgentCreate}, Cwd: s.info.Cwd, SessionID: d.SessionID,
				Model: s.info.Model, Provider: s.info.Provider, Mode: s.mode, Runtime: forkRuntime(s.info.Runtime)})
		case protocol.SessionOpList:
			fork := s.forkHead
			s.forkHead = false
			var d sessionsData
			if !decode(&d) {
				return
			}
			if fork {
				if len(d.Sessions) == 0 || d.Sessions[0].HeadEntryID == "" {
					s.scr.line("nothing to fork yet: the session is empty")
					return
				}
				s.command(&protocol.SessionOp{Header: h(protocol.TypeSessionOp), Op: protocol.SessionOpFork,
					Args: &protocol.SessionOpArgs{FromEntryID: d.Sessions[0].HeadEntryID}})
				return
			}
			for _, ss := range d.Sessions {
				var facts []string
				facts = append(facts, fmt.Sprintf("%d entries", ss.Entries))
				if ss.Current {
					facts = append(facts, "current")
				}
				if ss.ForkID != "" {
					facts = append(facts, "fork "+ss.ForkID+" at "+orDash(ss.SourceEntryID))
				}
				if ss.CompactionIndex != nil {
					facts = append(facts, fmt.Sprintf("compacted %d×", *ss.CompactionIndex))
				}
				if ss.Corrupt {
					facts = append(facts, "unreadable")
				}
				s.scr.line(fmt.Sprintf("%s %s (%s)", ss.Kind, orDash(ss.SessionID), strings.Join(facts, ", ")))
			}
		}
	case *protocol.AgentCreate:
		var d protocol.AgentCreateData
		if decode(&d) {
			s.scr.line(fmt.Sprintf("the fork is agent %s: shardctl attach %s", d.AgentID, d.AgentID))
		}
	}
}

// forkRuntime is the runtime profile the fork's agent is created on: the
// source's, "" for the default.
func forkRuntime(profile string) string {
	if profile == "shard" {
		return ""
	}
	return profile
}
