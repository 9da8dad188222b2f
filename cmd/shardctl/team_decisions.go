package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// teamDecisionsOptions are the options of shardctl team decisions.
type teamDecisionsOptions struct {
	g      *globalOptions
	output outputOptions
	goal   string
	all    bool
}

// AddFlags registers the team decisions flags on cmd.
func (o *teamDecisionsOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.StringVar(&o.goal, "goal", "", "only the decisions of this goal")
	fs.BoolVarP(&o.all, "all", "a", false, "also the decisions answered or cancelled")
	_ = cmd.RegisterFlagCompletionFunc("goal", completeTeamFlag(o.g, ids.Goal))
}

func newTeamDecisionsCommand(g *globalOptions) *cobra.Command {
	o := &teamDecisionsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "decisions [--goal GOAL] [--all]",
		Aliases: []string{"decision"},
		Short:   "List the decisions waiting on a person",
		Long: `List decisions (team.decision.list), oldest first: the open ones of every
goal by default — questions from the team's agents, permissions from the
gate, and a merge decision for each task in review. ID, KIND, GOAL, TASK,
AGE, the question and its options numbered as "shardctl team answer" takes
them; with --all every decision, with its STATE and ANSWER.
-o json|yaml prints {"decisions":[TeamDecision]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				goal, err := resolveTeamID(ctx, conn, ids.Goal, o.goal)
				if err != nil {
					return err
				}
				ds, err := listDecisions(ctx, conn, goal, !o.all)
				if err != nil {
					return err
				}
				if ds == nil {
					ds = []protocol.TeamDecision{}
				}
				for i := range ds {
					if ds[i].Options == nil {
						ds[i].Options = []string{}
					}
				}
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), protocol.TeamDecisionListData{Decisions: ds})
				}
				for i := range ds {
					ds[i].Question = firstLine(ds[i].Question)
				}
				safeAll(&ds)
				if len(ds) == 0 {
					if o.all {
						fmt.Fprintln(cmd.ErrOrStderr(), "No decisions.")
					} else {
						fmt.Fprintln(cmd.ErrOrStderr(), "No open decisions.")
					}
					return nil
				}
				return o.print(cmd.OutOrStdout(), ds)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func (o *teamDecisionsOptions) print(w io.Writer, ds []protocol.TeamDecision) error {
	st := o.output.style(o.g)
	var all []string
	for _, d := range ds {
		all = append(all, d.DecisionID, d.GoalID, d.TaskID)
	}
	idf := newTeamIDs(st.wide, all)
	width := termWidth(w)
	if st.wide {
		width = 0
	}
	p := newPalette(w, o.g.noColor)
	tw := newTableNoHeader(w, st.noHeaders)
	if o.all {
		fmt.Fprintln(tw, "ID\tKIND\tGOAL\tTASK\tAGE\tSTATE\tQUESTION\tANSWER")
	} else {
		fmt.Fprintln(tw, "ID\tKIND\tGOAL\tTASK\tAGE\tQUESTION\tOPTIONS")
	}
	for _, d := range ds {
		q := fit(d.Question, 50, width)
		if o.all {
			answer := numberedOptions(d.Options)
			if d.State != protocol.DecisionOpen {
				answer = orDash(fit(trimAnswer(answerText(d.Answer)), 50, width))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", idf.id(d.DecisionID), d.Kind, idf.id(d.GoalID), idf.id(d.TaskID),
				st.when(o.g.clock, d.CreatedAt), decisionState(p, d.State), q, answer)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", idf.id(d.DecisionID), d.Kind, idf.id(d.GoalID), idf.id(d.TaskID),
			st.when(o.g.clock, d.CreatedAt), q, numberedOptions(d.Options))
	}
	return tw.Flush()
}

// trimAnswer drops answerText's leading ": ".
func trimAnswer(s string) string {
	return strings.TrimSpace(strings.TrimPrefix(s, ":"))
}

// decisionState colors a decision state: open (waiting on a person)
// yellow.
func decisionState(p palette, s string) string {
	switch s {
	case protocol.DecisionOpen:
		return p.paint(sgrYellow, s)
	case protocol.DecisionAnswered:
		return p.paint(sgrGreen, s)
	}
	return p.paint(sgrDim, orDash(s))
}
