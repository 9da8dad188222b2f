package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

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
	g         *globalOptions
	output    outputOptions
	all       bool
	reconnect time.Duration
	// open are the decisions open at the last redraw.
	open map[string]bool
	// drawn is set once a view was drawn (the next is set apart).
	drawn bool
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

When the connection is lost (the daemon stopped, restarted or died), watch
says so on stderr and reconnects with backoff for up to --reconnect, then
draws the view again (the board is durable: it comes back as it was).

Runs until Ctrl-C (exit 0); exits 1 when the connection is lost and does not
come back within --reconnect.`,
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
			return o.run(cmd.Context(), goal, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.ValidArgsFunction = completeTeam(g, ids.Goal)
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&o.all, "all", "a", false, "also show cancelled tasks and closed decisions (with GOAL)")
	cmd.Flags().DurationVar(&o.reconnect, "reconnect", defaultReconnect, "when the connection is lost, keep reconnecting (with backoff) for this long; 0 exits at once")
	return cmd
}

// run connects, then draws and redraws until ctx ends; a lost connection
// is reconnected (with backoff, for up to --reconnect) and the view drawn
// again, the decisions it knew still known (no second bell for them).
func (o *teamWatchOptions) run(ctx context.Context, goal string, w, errw io.Writer) error {
	o.open = map[string]bool{}
	var rc reconnector
	id, resolved := goal, false
	for attempt := 0; ; attempt++ {
		conn, err := o.g.connect(ctx)
		if err != nil {
			if attempt == 0 || ctx.Err() != nil {
				return err // never connected: exit 3, as every command
			}
			if werr := rc.wait(ctx, o.reconnect); werr != nil {
				if ctx.Err() != nil {
					return nil
				}
				// %v, not %w: a lost connection (exit 1), not an
				// unreachable daemon at the start (exit 3).
				return failed(fmt.Errorf("connection to the daemon lost, and no reconnect within %s: %v", o.reconnect, err))
			}
			continue
		}
		if attempt > 0 {
			fmt.Fprintln(errw, "shardctl: reconnected")
			rc.reset()
		}
		if !resolved {
			// The goal is resolved first, before events are read: a few
			// calls, while the events of a short moment wait in the
			// client's buffer.
			if id, err = resolveTeamID(ctx, conn, ids.Goal, goal); err != nil {
				conn.Close()
				return err
			}
			resolved = true
		}
		err = o.session(ctx, conn, id, w)
		conn.Close()
		if ctx.Err() != nil {
			return nil // Ctrl-C
		}
		var lost *errConnLost
		if !errors.As(err, &lost) {
			return err
		}
		if o.reconnect <= 0 {
			return failed(lost.err)
		}
		fmt.Fprintf(errw, "shardctl: %v; reconnecting (for up to %s)…\n", lost.err, o.reconnect)
		if werr := rc.wait(ctx, o.reconnect); werr != nil {
			if ctx.Err() != nil {
				return nil
			}
			return failed(lost.err)
		}
	}
}

// session draws over one connection until it is lost (*errConnLost), ctx
// ends (nil) or a command fails.
func (o *teamWatchOptions) session(ctx context.Context, conn *client.Conn, id string, w io.Writer) error {
	// pump takes the events off the connection, so the client's reader
	// never stalls behind a full event buffer while a redraw waits for
	// responses; a burst of changes becomes one token in changed.
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
	tty := isTerminal(w)
	for {
		switch {
		case tty:
			io.WriteString(w, "\x1b[H\x1b[2J")
		case o.drawn:
			fmt.Fprintln(w)
		}
		o.drawn = true
		if err := o.draw(ctx, conn, id, w); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if conn.Err() != nil {
				return connEnded(conn)
			}
			return err
		}
		select {
		case <-changed:
		case <-pumped:
			return connEnded(conn)
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
