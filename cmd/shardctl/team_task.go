package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// teamTaskOptions are the options of shardctl team task.
type teamTaskOptions struct {
	g      *globalOptions
	output outputOptions
}

func newTeamTaskCommand(g *globalOptions) *cobra.Command {
	o := &teamTaskOptions{g: g}
	cmd := &cobra.Command{
		Use:   "task TASK cancel|retry|prioritize N|reassign AGENT",
		Short: "Cancel, retry, prioritize or reassign a task",
		Long: `Steer one task of a board (team.task.action):

  cancel          cancel the task (a doing task's run is stopped)
  retry           a blocked or cancelled task back to todo: it starts again
                  in its workspace, on its branch
  prioritize N    set its priority (an integer; the highest ready task
                  starts first; a negative one after "--")
  reassign AGENT  give it to another agent (an id, name or unique prefix)

Prints the task's id, state and priority; -o json|yaml prints
{"task": TeamTask}.`,
		Example: `  shardctl team task task-01j9z7k3 retry
  shardctl team task task-01j9z7k3 prioritize 5`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			msg := &protocol.TeamTaskAction{Header: teamHeader(protocol.TypeTeamTaskAction), TaskID: args[0], Action: args[1]}
			if len(args) == 3 {
				msg.Arg = args[2]
			}
			switch msg.Action {
			case protocol.TaskActionCancel, protocol.TaskActionRetry:
				if len(args) == 3 {
					return usageErrorf("%s takes no argument", msg.Action)
				}
			case protocol.TaskActionPrioritize, protocol.TaskActionReassign:
				if len(args) == 2 {
					return usageErrorf("%s needs an argument: %s", msg.Action, map[string]string{protocol.TaskActionPrioritize: "the priority, an integer", protocol.TaskActionReassign: "an agent"}[msg.Action])
				}
			default:
				return usageErrorf("unknown action %q: want cancel, retry, prioritize N or reassign AGENT", msg.Action)
			}
			if err := msg.Validate(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				id, err := resolveTeamID(ctx, conn, ids.Task, msg.TaskID)
				if err != nil {
					return err
				}
				msg.TaskID = id
				if msg.Action == protocol.TaskActionReassign {
					if msg.Arg, err = resolveAgent(ctx, conn, msg.Arg); err != nil {
						return err
					}
				}
				var data protocol.TeamTaskData
				if err := conn.Call(ctx, msg, &data); err != nil {
					return err
				}
				o.output.human(&data)
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), data)
				}
				t := data.Task
				line := fmt.Sprintf("%s %s, priority %d", t.TaskID, t.State, t.Priority)
				if t.Assignee != "" {
					line += ", assignee " + t.Assignee
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), line)
				return err
			})
		},
	}
	cmd.ValidArgsFunction = func(c *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return completeTeam(g, ids.Task)(c, args, s)
		case 1:
			return []string{"cancel", "retry", "prioritize", "reassign"}, cobra.ShellCompDirectiveNoFileComp
		case 2:
			if args[1] == protocol.TaskActionReassign {
				return completeAgents(g, false)(c, nil, s)
			}
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	o.output.AddFlags(cmd.Flags())
	return cmd
}
