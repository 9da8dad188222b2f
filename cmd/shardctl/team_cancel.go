package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// teamCancelOptions are the options of shardctl team cancel.
type teamCancelOptions struct {
	g      *globalOptions
	output outputOptions
}

func newTeamCancelCommand(g *globalOptions) *cobra.Command {
	o := &teamCancelOptions{g: g}
	cmd := &cobra.Command{
		Use:   "cancel GOAL",
		Short: "Cancel a goal",
		Long: `Cancel a goal (team.goal.cancel): the runs of its doing tasks are stopped,
its other open tasks and its open decisions cancelled. Nothing is deleted:
the board, the branches and the feed stay. Prints the goal's id and status;
-o json|yaml prints {"goal": TeamGoal}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				id, err := resolveTeamID(ctx, conn, ids.Goal, args[0])
				if err != nil {
					return err
				}
				var data protocol.TeamGoalData
				if err := conn.Call(ctx, &protocol.TeamGoalCancel{Header: teamHeader(protocol.TypeTeamGoalCancel), GoalID: id}, &data); err != nil {
					return err
				}
				o.output.human(&data)
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), data)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", data.Goal.GoalID, data.Goal.Status)
				return err
			})
		},
	}
	cmd.ValidArgsFunction = completeTeam(g, ids.Goal)
	o.output.AddFlags(cmd.Flags())
	return cmd
}
