package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// teamShowOptions are the options of shardctl team show.
type teamShowOptions struct {
	g      *globalOptions
	output outputOptions
	all    bool
}

// AddFlags registers the team show flags on cmd.
func (o *teamShowOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&o.all, "all", "a", false, "also show cancelled tasks and decisions no longer open")
}

func newTeamShowCommand(g *globalOptions) *cobra.Command {
	o := &teamShowOptions{g: g}
	cmd := &cobra.Command{
		Use:     "show GOAL",
		Aliases: []string{"board", "describe"},
		Short:   "Show a goal's board and its open decisions",
		Long: `Show one goal (team.goal.show): its status, progress, cost, lead and text;
then its board, the tasks grouped by column — TODO, DOING, REVIEW, DONE,
BLOCKED (CANCELLED only with --all) — each with its number on the board
(#, in creation order), id, title, priority, dependencies (as board
numbers), assignee (the worker), branch, diff stat (+additions −deletions,
files) and CI result, and a note (why it is blocked, or its summary); then
the goal's open decisions with their options numbered as "shardctl team
answer" takes them, an open merge decision with the "shardctl ws diff" that
shows its change (--all: every decision, with its answer).
-o json|yaml prints {"goal", "tasks", "decisions"} whole.`,
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
				b, err := showGoal(ctx, conn, id)
				if err != nil {
					return err
				}
				normalizeBoard(&b)
				if o.output.structured() {
					return o.output.write(cmd.OutOrStdout(), b)
				}
				humanBoard(&b)
				bv := boardView{clock: o.g.clock, p: newPalette(cmd.OutOrStdout(), o.g.noColor), wide: o.output.format == formatWide,
					all: o.all, width: termWidth(cmd.OutOrStdout()), names: boardNames(ctx, conn, b)}
				return bv.write(cmd.OutOrStdout(), b)
			})
		},
	}
	cmd.ValidArgsFunction = completeTeam(g, ids.Goal)
	o.AddFlags(cmd)
	return cmd
}

// normalizeBoard makes the lists of a board non-nil, so JSON shows [].
func normalizeBoard(b *protocol.TeamGoalShowData) {
	if b.Tasks == nil {
		b.Tasks = []protocol.TeamTask{}
	}
	if b.Decisions == nil {
		b.Decisions = []protocol.TeamDecision{}
	}
	for i := range b.Tasks {
		if b.Tasks[i].Deps == nil {
			b.Tasks[i].Deps = []string{}
		}
	}
	for i := range b.Decisions {
		if b.Decisions[i].Options == nil {
			b.Decisions[i].Options = []string{}
		}
	}
}

// boardNames names the lead and the workers of a board, best effort.
func boardNames(ctx context.Context, conn *client.Conn, b protocol.TeamGoalShowData) map[string]string {
	agents := []string{b.Goal.LeadAgentID}
	for _, t := range b.Tasks {
		agents = append(agents, t.Assignee)
	}
	return agentNamesOf(ctx, conn, agents)
}

// boardColumns are the board's columns, in the order shown.
var boardColumns = []string{protocol.TaskTodo, protocol.TaskDoing, protocol.TaskReview, protocol.TaskDone, protocol.TaskBlocked, protocol.TaskCancelled}

// boardView renders a goal's board for people (show and watch).
type boardView struct {
	clock clock
	p     palette
	wide  bool // whole ids, absolute times
	all   bool // cancelled tasks and closed decisions too
	width int  // the terminal's; 0: never truncate
	names map[string]string
}

// who is an agent's name when known, else its id.
func (v boardView) who(id string) string {
	if n := v.names[id]; n != "" {
		return n
	}
	return orDash(id)
}

// write renders the goal, its board and its decisions.
func (v boardView) write(w io.Writer, b protocol.TeamGoalShowData) error {
	gl := b.Goal
	done, total := taskCounts(b.Tasks)
	tw := newTable(w)
	row := func(k, val string) { fmt.Fprintf(tw, "%s:\t%s\n", k, val) }
	row("Goal", gl.GoalID)
	row("Status", fmt.Sprintf("%s, %s done (%d/%d tasks)", v.p.goalState(gl.Status), percent(gl.Progress), done, total))
	row("Cost", goalCost(gl))
	lead := "-"
	if gl.LeadAgentID != "" {
		lead = gl.LeadAgentID + nameSuffix(v.names, gl.LeadAgentID)
	}
	row("Lead", lead)
	row("Repository", orDash(gl.Cwd))
	row("Created", fmt.Sprintf("%s (%s)", v.clock.formatTime(gl.CreatedAt), v.clock.ago(gl.CreatedAt)))
	if gl.EndedAt != 0 {
		row("Ended", v.clock.formatTime(gl.EndedAt))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write goal: %w", err)
	}
	for _, l := range strings.Split(strings.TrimRight(gl.Text, "\n"), "\n") {
		fmt.Fprintln(w, "  "+l)
	}
	if err := v.writeTasks(w, b.Tasks); err != nil {
		return err
	}
	return v.writeDecisions(w, b.Tasks, b.Decisions)
}

// writeTasks renders the board's columns.
func (v boardView) writeTasks(w io.Writer, tasks []protocol.TeamTask) error {
	fmt.Fprintln(w)
	if len(tasks) == 0 {
		fmt.Fprintln(w, v.p.dim("No tasks yet: the lead is planning."))
		return nil
	}
	num := map[string]int{}
	var all []string
	for i, t := range tasks {
		num[t.TaskID] = i + 1
		all = append(all, t.TaskID)
	}
	idf := newTeamIDs(v.wide, all)
	tw := newTable(w)
	hidden := 0
	first := true
	for _, col := range boardColumns {
		var in []protocol.TeamTask
		for _, t := range tasks {
			if t.State == col {
				in = append(in, t)
			}
		}
		if col == protocol.TaskCancelled && !v.all {
			hidden = len(in)
			continue
		}
		if len(in) == 0 {
			continue
		}
		if !first {
			fmt.Fprintln(tw)
		}
		first = false
		fmt.Fprintf(tw, "%s (%d)\n", v.p.taskLabel(col, strings.ToUpper(col)), len(in))
		fmt.Fprintln(tw, "  #\tID\tTITLE\tPRIO\tDEPS\tASSIGNEE\tBRANCH\tDIFF\tCI\tNOTE")
		for _, t := range in {
			deps := make([]string, 0, len(t.Deps))
			for _, d := range t.Deps {
				if n, ok := num[d]; ok {
					deps = append(deps, "#"+strconv.Itoa(n))
				} else {
					deps = append(deps, d)
				}
			}
			note := t.BlockedReason
			if note == "" {
				note = t.Summary
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", num[t.TaskID], idf.id(t.TaskID), fit(t.Title, 40, v.width),
				t.Priority, orDash(strings.Join(deps, ",")), v.who(t.Assignee), orDash(t.Branch), diffStat(t.Diff),
				v.p.ciState(t.CI.Status), orDash(fit(firstLine(note), 48, v.width)))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write board: %w", err)
	}
	if hidden > 0 {
		fmt.Fprintln(w, v.p.dim(fmt.Sprintf("(%d cancelled not shown; --all shows them)", hidden)))
	}
	return nil
}

// writeDecisions renders a goal's decisions: the open ones (all of them
// with --all), each with its options numbered.
func (v boardView) writeDecisions(w io.Writer, tasks []protocol.TeamTask, ds []protocol.TeamDecision) error {
	var shown []protocol.TeamDecision
	for _, d := range ds {
		if v.all || d.State == protocol.DecisionOpen {
			shown = append(shown, d)
		}
	}
	fmt.Fprintln(w)
	if len(shown) == 0 {
		fmt.Fprintln(w, v.p.dim("No open decisions."))
		return nil
	}
	title := "OPEN DECISIONS"
	if v.all {
		title = "DECISIONS"
	}
	fmt.Fprintf(w, "%s (%d)\n", v.p.paint(sgrYellow, title), len(shown))
	num := map[string]int{}
	workspace := map[string]string{}
	for i, t := range tasks {
		num[t.TaskID] = i + 1
		workspace[t.TaskID] = t.WorkspaceID
	}
	var all []string
	for _, d := range ds {
		all = append(all, d.DecisionID)
	}
	idf := newTeamIDs(v.wide, all)
	for _, d := range shown {
		what := d.Kind
		if n, ok := num[d.TaskID]; ok {
			what += fmt.Sprintf(" of #%d", n)
		}
		if d.AgentID != "" {
			what += " from " + v.who(d.AgentID)
		}
		fmt.Fprintf(w, "  %s  %s  %s\n", idf.id(d.DecisionID), what, v.clock.ago(d.CreatedAt))
		writeDecisionBody(w, d, v.p, "    ")
		if ws := workspace[d.TaskID]; d.Kind == protocol.DecisionKindMerge && d.State == protocol.DecisionOpen && ws != "" {
			fmt.Fprintln(w, "    "+v.p.dim("the change: shardctl ws diff "+ws))
		}
	}
	return nil
}

// writeDecisionBody writes a decision's question, context, tool, options
// and, once answered, its answer, each line indented.
func writeDecisionBody(w io.Writer, d protocol.TeamDecision, p palette, indent string) {
	for _, l := range strings.Split(strings.TrimRight(d.Question, "\n"), "\n") {
		fmt.Fprintln(w, indent+p.bold(l))
	}
	if d.Tool != "" {
		fmt.Fprintln(w, indent+"tool: "+d.Tool)
	}
	if c := strings.TrimRight(d.Context, "\n"); c != "" {
		for _, l := range strings.Split(c, "\n") {
			fmt.Fprintln(w, indent+p.dim(l))
		}
	}
	if d.RefusedReason != "" && d.State == protocol.DecisionOpen {
		fmt.Fprintln(w, indent+p.red("refused: "+d.RefusedReason))
	}
	switch d.State {
	case protocol.DecisionOpen:
		fmt.Fprintln(w, indent+"options: "+numberedOptions(d.Options))
	default:
		fmt.Fprintln(w, indent+d.State+answerText(d.Answer))
	}
}

// answerText renders an answer: ": Merge — text (by …)".
func answerText(a *protocol.TeamAnswer) string {
	if a == nil {
		return ""
	}
	s := ": " + a.Option
	if a.Option == "" {
		s = ":"
	}
	if a.Text != "" {
		if a.Option != "" {
			s += " —"
		}
		s += " " + firstLine(a.Text)
	}
	if a.By != "" {
		s += " (by " + a.By + ")"
	}
	return s
}
