package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// bell is the terminal bell: written when a decision opens, since a
// decision waiting on a person is what a watcher must not miss.
const bell = "\a"

// teamWatchOptions are the options of shardctl team watch.
type teamWatchOptions struct {
	g      *globalOptions
	output outputOptions
	all    bool
	// open are the decisions open at the last redraw.
	open map[string]bool
}

func newTeamWatchCommand(g *globalOptions) *cobra.Command {
	o := &teamWatchOptions{g: g}
	cmd := &cobra.Command{
		Use:   "watch [GOAL]",
		Short: "Watch a goal's board and the decisions live",
		Long: `A live view of the team: with GOAL, that goal's board and decisions as
"team show" prints them; without, the open goals and every open decision.
Redrawn whenever the daemon reports a change (team_goal_changed,
team_task_changed, team_decision_changed), a burst of changes being one
redraw. On a terminal the screen is cleared before each redraw; elsewhere
the views are separated by a blank line.

When a decision opens (and at the start, when some are open) the terminal
bell rings and the view ends with how to answer.

Runs until Ctrl-C (exit 0); the connection's loss exits 1.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			if o.output.structured() {
				return usageErrorf("watch draws for people: use -o table or wide (team feed --follow -o json streams)")
			}
			goal := ""
			if len(args) == 1 {
				goal = args[0]
			}
			return o.run(cmd.Context(), goal, cmd.OutOrStdout())
		},
	}
	cmd.ValidArgsFunction = completeTeam(g, ids.Goal)
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&o.all, "all", "a", false, "also show cancelled tasks and closed decisions (with GOAL)")
	return cmd
}

// run connects, then draws and redraws until ctx ends or the connection
// is lost.
func (o *teamWatchOptions) run(ctx context.Context, goal string, w io.Writer) error {
	conn, err := o.g.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The goal is resolved first (a few calls, while the events of a
	// short moment wait in the client's buffer).
	id, err := resolveTeamID(ctx, conn, ids.Goal, goal)
	if err != nil {
		return err
	}
	// Then pump takes the events off the connection, so the client's
	// reader never stalls behind a full event buffer while a redraw waits
	// for responses; a burst of changes becomes one token in changed.
	changed := make(chan struct{}, 1)
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		for ev := range conn.Events() {
			if teamChange(ev.Msg, id) {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	defer func() {
		conn.Close()
		<-pumped
	}()
	o.open = map[string]bool{}
	tty := isTerminal(w)
	for first := true; ; first = false {
		switch {
		case tty:
			io.WriteString(w, "\x1b[H\x1b[2J")
		case !first:
			fmt.Fprintln(w)
		}
		if err := o.draw(ctx, conn, id, w); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if conn.Err() != nil {
				return failed(connEnded(conn))
			}
			return err
		}
		select {
		case <-changed:
		case <-pumped:
			return failed(connEnded(conn))
		case <-ctx.Done():
			return nil
		}
	}
}

// teamChange reports whether an event changes the view of goal (every
// goal's when empty).
func teamChange(m protocol.Typed, goal string) bool {
	switch e := m.(type) {
	case *protocol.TeamGoalChanged:
		return goal == "" || e.Goal.GoalID == goal
	case *protocol.TeamTaskChanged:
		return goal == "" || e.Task.GoalID == goal
	case *protocol.TeamDecisionChanged:
		return goal == "" || e.Decision.GoalID == goal
	}
	return false
}

// draw renders one view: a goal's board, or the open goals and decisions.
func (o *teamWatchOptions) draw(ctx context.Context, conn *client.Conn, goal string, w io.Writer) error {
	p := newPalette(w, o.g.noColor)
	bv := boardView{clock: o.g.clock, p: p, wide: o.output.format == formatWide, all: o.all, width: termWidth(w)}
	var open []protocol.TeamDecision
	if goal != "" {
		b, err := showGoal(ctx, conn, goal)
		if err != nil {
			return err
		}
		normalizeBoard(&b)
		humanBoard(&b)
		bv.names = boardNames(ctx, conn, b)
		for _, d := range b.Decisions {
			if d.State == protocol.DecisionOpen {
				open = append(open, d)
			}
		}
		o.ring(w, open)
		if err := bv.write(w, b); err != nil {
			return err
		}
	} else {
		goals, err := listGoals(ctx, conn, true)
		if err != nil {
			return err
		}
		rows := make([]goalRow, len(goals))
		for i, gl := range goals {
			gl.Text = firstLine(gl.Text)
			safeAll(&gl)
			rows[i].goal = gl
			if b, err := showGoal(ctx, conn, gl.GoalID); err == nil {
				rows[i].done, rows[i].total = taskCounts(b.Tasks)
				rows[i].counted = true
			}
		}
		if open, err = listDecisions(ctx, conn, "", true); err != nil {
			return err
		}
		humanDecisions(open)
		o.ring(w, open)
		var agents []string
		for _, d := range open {
			agents = append(agents, d.AgentID)
		}
		bv.names = agentNamesOf(ctx, conn, agents)
		if len(rows) == 0 {
			fmt.Fprintln(w, p.dim("No open goals."))
		} else {
			gopt := teamGoalsOptions{g: o.g, output: o.output}
			if err := gopt.print(w, rows); err != nil {
				return err
			}
		}
		if err := bv.writeDecisions(w, nil, open); err != nil {
			return err
		}
	}
	if len(open) > 0 {
		noun := "decisions wait"
		if len(open) == 1 {
			noun = "decision waits"
		}
		fmt.Fprintf(w, "\n%s on you: shardctl team answer %s <option> [--text …]\n", p.bold(fmt.Sprintf("%d %s", len(open), noun)), open[0].DecisionID)
	}
	return nil
}

// ring writes the bell when a decision of open was not open at the last
// redraw, and remembers the open ones.
func (o *teamWatchOptions) ring(w io.Writer, open []protocol.TeamDecision) {
	now := map[string]bool{}
	fresh := false
	for _, d := range open {
		now[d.DecisionID] = true
		fresh = fresh || !o.open[d.DecisionID]
	}
	if fresh {
		io.WriteString(w, bell)
	}
	o.open = now
}
