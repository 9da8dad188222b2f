package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// teamGoalsOptions are the options of shardctl team goals.
type teamGoalsOptions struct {
	g      *globalOptions
	output outputOptions
	open   bool
}

// AddFlags registers the team goals flags on cmd.
func (o *teamGoalsOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.open, "open", false, "only the goals still planning or active")
}

// goalRow is one goal of the table with its board's counts.
type goalRow struct {
	goal        protocol.TeamGoal
	done, total int
	counted     bool
}

func newTeamGoalsCommand(g *globalOptions) *cobra.Command {
	o := &teamGoalsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "goals [--open]",
		Aliases: []string{"ls", "list"},
		Short:   "List the team's goals",
		Long: `List goals (team.goal.list), newest first: ID, STATUS, PROGRESS (the done
share of the tasks not cancelled), TASKS (done/total, cancelled left out),
COST (spent, and /limit when the goal has one), LEAD (the lead agent), AGE
and the goal's first line. --open keeps the planning and active ones.
-o json|yaml prints {"goals":[TeamGoal]} (without task counts).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				goals, err := listGoals(ctx, conn, o.open)
				if err != nil {
					return err
				}
				if goals == nil {
					goals = []protocol.TeamGoal{}
				}
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), protocol.TeamGoalListData{Goals: goals})
				}
				if len(goals) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "No goals.")
					return nil
				}
				rows := make([]goalRow, len(goals))
				for i, gl := range goals {
					gl.Text = firstLine(gl.Text)
					safeAll(&gl)
					rows[i].goal = gl
					// The counts cost one goal.show each: cheap on a local
					// socket; a goal gone meanwhile shows "-".
					if b, err := showGoal(ctx, conn, gl.GoalID); err == nil {
						rows[i].done, rows[i].total = taskCounts(b.Tasks)
						rows[i].counted = true
					}
				}
				return o.print(cmd.OutOrStdout(), rows)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// taskCounts counts the done tasks and every task not cancelled.
func taskCounts(tasks []protocol.TeamTask) (done, total int) {
	for _, t := range tasks {
		switch t.State {
		case protocol.TaskCancelled:
			continue
		case protocol.TaskDone:
			done++
		}
		total++
	}
	return done, total
}

func (o *teamGoalsOptions) print(w io.Writer, rows []goalRow) error {
	st := o.output.style(o.g)
	var all, leads []string
	for _, r := range rows {
		all = append(all, r.goal.GoalID)
		leads = append(leads, r.goal.LeadAgentID)
	}
	idf := newTeamIDs(st.wide, all)
	st.shorten(leads)
	width := termWidth(w)
	if st.wide {
		width = 0
	}
	p := newPalette(w, o.g.noColor)
	tw := newTableNoHeader(w, st.noHeaders)
	fmt.Fprintln(tw, "ID\tSTATUS\tPROGRESS\tTASKS\tCOST\tLEAD\tAGE\tGOAL")
	for _, r := range rows {
		gl := r.goal
		tasks := "-"
		if r.counted {
			tasks = fmt.Sprintf("%d/%d", r.done, r.total)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", idf.id(gl.GoalID), p.goalState(gl.Status), percent(gl.Progress),
			tasks, goalCost(gl), st.agent(gl.LeadAgentID), st.when(o.g.clock, gl.CreatedAt), fit(gl.Text, 50, width))
	}
	return tw.Flush()
}
