package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// teamMessageOptions are the options of shardctl team message.
type teamMessageOptions struct {
	g      *globalOptions
	output outputOptions
	goal   string
}

// Recipients of team.message that are not agents (docs/protocol.md §10.4).
const (
	toLead = "lead"
	toAll  = "all"
	toUser = "user"
)

func newTeamMessageCommand(g *globalOptions) *cobra.Command {
	o := &teamMessageOptions{g: g}
	cmd := &cobra.Command{
		Use:     "message TO TEXT... [--goal GOAL]",
		Aliases: []string{"msg", "say"},
		Short:   "Send a message to the team's lead or one of its agents",
		Long: `Send a message within the team (team.message), from you. TO is "lead" (the
goal's lead), "all" (the lead; a leading "@name" in the text routes it to
the agent so named), "user", or an agent (id, name or unique prefix). The
message is delivered into the agent's turn when one runs, otherwise as a
prompt, and is a feed item. Prints the feed item's id; -o json|yaml prints
{"item": TeamFeedItem}.`,
		Example: `  shardctl team message lead "also update the README"
  shardctl team message all "@ada use the existing helper"`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			msg := &protocol.TeamMessage{Header: teamHeader(protocol.TypeTeamMessage), To: args[0], Text: strings.Join(args[1:], " ")}
			if err := msg.Validate(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				var err error
				if msg.GoalID, err = resolveTeamID(ctx, conn, ids.Goal, o.goal); err != nil {
					return err
				}
				switch msg.To {
				case toLead, toAll, toUser:
				default:
					if msg.To, err = resolveAgent(ctx, conn, msg.To); err != nil {
						return err
					}
				}
				var data protocol.TeamFeedItemData
				if err := conn.Call(ctx, msg, &data); err != nil {
					return err
				}
				o.output.human(&data)
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), data)
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), data.Item.FeedID)
				return err
			})
		},
	}
	cmd.ValidArgsFunction = func(c *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		agents, dir := completeAgents(g, false)(c, args, s)
		return append([]string{toLead + "\tthe goal's lead", toAll + "\tthe lead; @name routes", toUser + "\tthe person"}, agents...), dir
	}
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.goal, "goal", "", "the goal the message is about (whose lead gets it)")
	_ = cmd.RegisterFlagCompletionFunc("goal", completeTeamFlag(g, ids.Goal))
	return cmd
}
