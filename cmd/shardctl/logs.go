package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// logsOptions are the options of shardctl logs.
type logsOptions struct {
	g      *globalOptions
	follow bool
	turns  int
}

func newLogsCommand(g *globalOptions) *cobra.Command {
	o := &logsOptions{g: g}
	cmd := &cobra.Command{
		Use:   "logs AGENT [-f] [--turns N]",
		Short: "Print an agent's conversation as a person reads it",
		Long: `Print AGENT's conversation (its live window, after any compaction): prompts,
the assistant's text, tool calls with their results. --turns N keeps the
last N turns. -f then follows the agent live, as an observer (it never
answers): text as it streams, tool calls and results, questions and who
answered them, turn ends — until Ctrl-C (exit 0) or the connection is lost
(exit 1).

Choice: no --since. Messages carry no time on the wire, so a time filter
could only guess; --turns bounds the output instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.turns < 0 {
				return usageErrorf("--turns must not be negative")
			}
			return withConn(cmd.Context(), g, func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, args[0], cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "follow the agent live after the transcript")
	cmd.Flags().IntVar(&o.turns, "turns", 0, "only the last N turns (0: all)")
	cmd.ValidArgsFunction = completeAgents(g, false)
	return cmd
}

func (o *logsOptions) run(ctx context.Context, conn *client.Conn, handle string, w io.Writer) error {
	id, err := resolveAgent(ctx, conn, handle)
	if err != nil {
		return err
	}
	attach := &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}, Role: protocol.RoleObserver}
	if err := conn.Call(ctx, attach, nil); err != nil {
		return fmt.Errorf("attach %s: %w", id, err)
	}
	sync, err := awaitSync(ctx, conn, id)
	if err != nil {
		return err
	}
	p := newPalette(w, o.g.noColor)
	for _, l := range transcriptLines(lastTurns(sync.LiveWindow.Messages, o.turns), p) {
		fmt.Fprintln(w, l)
	}
	if !o.follow {
		_, _ = conn.Request(ctx, &protocol.AgentDetach{Header: protocol.Header{Type: protocol.TypeAgentDetach, AgentID: id}})
		return nil
	}
	midLine := false
	line := func(s string) {
		if midLine {
			fmt.Fprintln(w)
			midLine = false
		}
		fmt.Fprintln(w, s)
	}
	for {
		select {
		case ev, ok := <-conn.Events():
			if !ok {
				if midLine {
					fmt.Fprintln(w)
				}
				return failed(connEnded(conn))
			}
			if ev.Msg.Head().AgentID != id {
				continue
			}
			safeEvent(ev.Msg)
			switch m := ev.Msg.(type) {
			case *protocol.MessageDelta:
				if m.Kind == protocol.DeltaText && m.TextDelta != "" {
					io.WriteString(w, m.TextDelta)
					midLine = !strings.HasSuffix(m.TextDelta, "\n")
				}
			case *protocol.ToolCall:
				line(p.dim("⚙ " + strings.TrimSpace(m.Name+" "+toolTarget(m.Args))))
			case *protocol.ToolResult:
				line(p.dim("↳ " + resultSummary(m)))
			case *protocol.PermissionRequest:
				line(fmt.Sprintf("? %s asks: %s (%s)", m.RequestID, orDefault(strings.Join(strings.Fields(m.Prompt), " "),
					"Allow "+strings.TrimSpace(m.ToolName+" "+toolTarget(m.Input))+"?"), permissionChoices(m)))
			case *protocol.UIRequest:
				line(fmt.Sprintf("? %s asks: %s", m.RequestID, strings.Trim(strings.Join([]string{m.Title, m.Message}, " — "), " —")))
			case *protocol.PermissionResolved:
				line(p.dim(fmt.Sprintf("(%s: %s by %s)", m.RequestID, firstNonEmpty(m.Decision, m.ChoiceID), orDefault(m.Source, "a client"))))
			case *protocol.UIResolved:
				line(p.dim(fmt.Sprintf("(%s: answered by %s)", m.RequestID, orDefault(m.Source, "a client"))))
			case *protocol.TurnEnd:
				line(p.dim("— turn ended"))
			case *protocol.ErrorEvent:
				line(p.red(fmt.Sprintf("error: %s: %s", m.Code, m.Message)))
			case *protocol.AgentExited:
				line(p.red(fmt.Sprintf("runtime exited (%s): %s", m.RuntimeState, orDash(m.Reason))))
			}
		case <-ctx.Done():
			if midLine {
				fmt.Fprintln(w)
			}
			return nil
		}
	}
}
