package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// questions ls / answer: the permission and UI requests open across every
// agent. The daemon has no command that lists them, so shardctl asks
// agent.list for the agents waiting for an answer and reads each one's
// pending_requests from the sync of an observer attach (docs/protocol.md
// §6.4); an observer neither answers nor starts a runtime (only agents whose
// status says they wait are attached, and those run). Answering attaches
// interactively to the asking agent and sends the response with its agent_id,
// which also answers a subagent's question delegated to its parent (§6.3).
// Choice: no age column — a request carries no time on the wire; the agent's
// status says how long nothing else happened.

// openQuestion is one open request, for questions ls.
type openQuestion struct {
	RequestID string `json:"request_id"`
	AgentID   string `json:"agent_id"`
	Agent     string `json:"agent"` // its name, "-" without one
	Kind      string `json:"kind"`  // "permission", or the UI kind (select, confirm, input, editor)
	// What is asked: the tool and its target, or the UI title and message.
	What string `json:"what"`
	// Answers lists what questions answer takes.
	Answers []string `json:"answers"`

	perm *protocol.PermissionRequest
	ui   *protocol.UIRequest
}

func newQuestionsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "questions",
		Aliases: []string{"q"},
		Short:   "List and answer open permission and UI questions across agents",
		Args:    cobra.ArbitraryArgs,
		RunE:    groupRunE,
	}
	var out outputOptions
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List every open permission and UI question",
		Long: `List the permission and UI requests every agent is waiting on (subagents
included), with what each asks and the answers "questions answer" takes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			return withConn(cmd.Context(), g, func(ctx context.Context, conn *client.Conn) error {
				qs, err := openQuestions(ctx, conn)
				if err != nil {
					return err
				}
				out.human(&qs)
				if out.structured() {
					return out.write(cmd.OutOrStdout(), qs)
				}
				if len(qs) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "No open questions.")
					return nil
				}
				tw := newTableNoHeader(cmd.OutOrStdout(), g.noHeaders)
				fmt.Fprintln(tw, "REQUEST_ID\tAGENT\tNAME\tKIND\tQUESTION\tANSWERS")
				for _, q := range qs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", q.RequestID, q.AgentID, q.Agent, q.Kind, truncate(q.What, 60), strings.Join(q.Answers, "|"))
				}
				return tw.Flush()
			})
		},
	}
	out.AddFlags(ls.Flags())
	var reason string
	answer := &cobra.Command{
		Use:   "answer REQUEST_ID ANSWER",
		Short: "Answer an open question",
		Long: `Answer an open question: a permission request takes allow, deny or always
(allow this exact call from now on) — or y, n, a — or the id or number of
one of its choices (sent as choice_id when the request offers choices), with
--reason to tell the agent why; a select takes an option's number or text
(a multi-select several, "1,3"), a confirm yes or no, an input the text. The first answer wins, from whichever client sends it (this
command, an attached terminal, the web dashboard); a question answered
meanwhile elsewhere is reported as such.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withConn(cmd.Context(), g, func(ctx context.Context, conn *client.Conn) error {
				return answerQuestion(ctx, conn, args[0], args[1], reason, cmd.OutOrStdout())
			})
		},
	}
	answer.Flags().StringVar(&reason, "reason", "", "a reason for the agent, sent with the answer (permission questions)")
	cmd.AddCommand(ls, answer)
	return cmd
}

// openQuestions collects the open requests of every waiting agent.
func openQuestions(ctx context.Context, conn *client.Conn) ([]openQuestion, error) {
	var list protocol.AgentListData
	if err := readAllAgents(ctx, conn, &list); err != nil {
		return nil, err
	}
	qs := []openQuestion{}
	for _, a := range list.Agents {
		if a.Status != protocol.StatusWaitingForPermission && a.Status != protocol.StatusWaitingForUI {
			continue
		}
		msg := &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: a.AgentID}, Role: protocol.RoleObserver}
		if err := conn.Call(ctx, msg, nil); err != nil {
			continue // gone or stopped meanwhile
		}
		sync, err := awaitSync(ctx, conn, a.AgentID)
		if err != nil {
			return nil, err
		}
		for _, raw := range sync.PendingRequests {
			if q, ok := questionOf(a, raw); ok {
				qs = append(qs, q)
			}
		}
		_, _ = conn.Request(ctx, &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: a.AgentID}})
	}
	return qs, nil
}

// awaitSync reads events until the sync an attach to agentID sends.
func awaitSync(ctx context.Context, conn *client.Conn, agentID string) (*protocol.Sync, error) {
	for {
		select {
		case ev, ok := <-conn.Events():
			if !ok {
				return nil, fmt.Errorf("connection to the daemon lost: %w", conn.Err())
			}
			if s, ok := ev.Msg.(*protocol.Sync); ok && s.AgentID == agentID {
				return s, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// withConn connects, runs fn (which reads the events itself) and closes.
func withConn(ctx context.Context, g *globalOptions, fn func(ctx context.Context, conn *client.Conn) error) error {
	conn, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return fn(ctx, conn)
}

// questionOf decodes one pending request of agent a.
func questionOf(a protocol.AgentInfo, raw json.RawMessage) (openQuestion, bool) {
	msg, err := protocol.DecodeEvent(raw)
	if err != nil {
		return openQuestion{}, false
	}
	q := openQuestion{AgentID: a.AgentID, Agent: agentName(a)}
	if id := msg.Head().AgentID; id != "" {
		q.AgentID = id
	}
	switch m := msg.(type) {
	case *protocol.PermissionRequest:
		q.RequestID, q.Kind, q.perm = m.RequestID, "permission", m
		q.What = orDefault(strings.Join(strings.Fields(m.Prompt), " "), strings.TrimSpace(m.ToolName+" "+toolTarget(m.Input)))
		word := map[string]string{protocol.DecisionAllow: "allow", protocol.DecisionDeny: "deny", protocol.DecisionAllowAlways: "always"}
		for _, d := range []string{protocol.DecisionAllow, protocol.DecisionDeny, protocol.DecisionAllowAlways} {
			if allows(m, d) {
				q.Answers = append(q.Answers, word[d])
			}
		}
		for _, c := range m.Choices {
			// A choice named like a decision ("allow", "allow_always") is
			// already offered by its word; listing it again reads as two answers.
			if w, ok := word[c.ID]; ok && slices.Contains(q.Answers, w) {
				continue
			}
			q.Answers = append(q.Answers, c.ID)
		}
	case *protocol.UIRequest:
		if m.Kind == protocol.UINotify {
			return openQuestion{}, false
		}
		q.RequestID, q.Kind, q.ui = m.RequestID, m.Kind, m
		q.What = strings.Trim(strings.Join([]string{m.Title, m.Message}, " — "), " —")
		switch m.Kind {
		case protocol.UISelect:
			q.Answers = m.Options
			if m.Multiple {
				q.Answers = append(slices.Clone(m.Options), "N,M…")
			}
		case protocol.UIConfirm:
			q.Answers = []string{"yes", "no"}
		default:
			q.Answers = []string{"TEXT"}
		}
	default:
		return openQuestion{}, false
	}
	return q, true
}

// answerQuestion sends the answer to request id.
func answerQuestion(ctx context.Context, conn *client.Conn, id, answer, reason string, w io.Writer) error {
	qs, err := openQuestions(ctx, conn)
	if err != nil {
		return err
	}
	// From here on only responses matter: drain the events, so that the
	// client never stops reading on a full event buffer.
	go func() {
		for range conn.Events() {
		}
	}()
	var q *openQuestion
	for i := range qs {
		if qs[i].RequestID == id {
			q = &qs[i]
		}
	}
	if q == nil {
		return protocol.Errorf(protocol.CodeNotFound, "no open question %q (answered already, or never asked); see shardctl questions ls", id)
	}
	var cmd protocol.Typed
	h := func(typ string) protocol.Header { return protocol.Header{Type: typ, AgentID: q.AgentID} }
	if p := q.perm; p != nil {
		a, ok := parsePermission(lineResult{line: answer}, p)
		if !ok {
			return usageErrorf("answer %q: want one of %s", answer, strings.Join(q.Answers, ", "))
		}
		if reason != "" {
			a.reason = reason
		}
		cmd = a.response(q.AgentID, id)
	} else {
		value, ok := parseUIValue(lineResult{line: answer}, q.ui)
		if !ok {
			return usageErrorf("answer %q: want one of %s", answer, strings.Join(q.Answers, ", "))
		}
		cmd = &protocol.UIResponse{Header: h(protocol.TypeUIResponse), RequestID: id, Value: value}
	}
	attach := &protocol.AgentAttach{Header: h(protocol.TypeAgentAttach), Role: protocol.RoleInteractive}
	if err := conn.Call(ctx, attach, nil); err != nil {
		return fmt.Errorf("attach %s: %w", q.AgentID, err)
	}
	defer func() {
		_, _ = conn.Request(context.WithoutCancel(ctx), &protocol.AgentDetach{Header: h(protocol.TypeAgentDetach)})
	}()
	if err := conn.Call(ctx, cmd, nil); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "Answered %s of %s (%s): %s\n", safe(id), safe(q.AgentID), safe(q.Agent), safe(answer))
	return err
}
