package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// teamFeedOptions are the options of shardctl team feed.
type teamFeedOptions struct {
	g      *globalOptions
	output outputOptions
	goal   string
	limit  int
	before string
	follow bool
}

// AddFlags registers the team feed flags on cmd.
func (o *teamFeedOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.StringVar(&o.goal, "goal", "", "only this goal's items")
	fs.IntVarP(&o.limit, "limit", "n", 0, "how many items, at most 200 (default the daemon's, 50)")
	fs.StringVar(&o.before, "before", "", "the items older than this feed id (paging)")
	fs.BoolVarP(&o.follow, "follow", "F", false, "then print new items as they come, until interrupted")
	_ = cmd.RegisterFlagCompletionFunc("goal", completeTeamFlag(o.g, ids.Goal))
}

func newTeamFeedCommand(g *globalOptions) *cobra.Command {
	o := &teamFeedOptions{g: g}
	cmd := &cobra.Command{
		Use:   "feed [--goal GOAL] [--limit N] [--follow]",
		Short: "Print the team's activity feed",
		Long: `Print the team's feed (team.feed): every step of the team, one line each,
oldest first — "<time> <kind> <agent> [-> <to>] <text>", the agent by its
name (-o wide: the date too, and agent ids). The newest --limit
items (50 by default); when older ones remain, the --before that pages to
them is printed on stderr. --goal keeps one goal's items.

--follow then prints each new item as it is added (team_feed_added), until
Ctrl-C (exit 0); the connection's loss exits 1.

-o json|yaml prints {"items", "next_before"} (newest first, as the daemon
answers); with --follow, -o json prints one item per line (JSON Lines),
oldest first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			if o.limit < 0 || o.limit > protocol.MaxTeamFeedPage {
				return usageErrorf("--limit %d: want 1 to %d", o.limit, protocol.MaxTeamFeedPage)
			}
			if o.follow && o.output.format == formatYAML {
				return usageErrorf("--follow prints JSON Lines: use -o json, not yaml")
			}
			return withConn(cmd.Context(), g, func(ctx context.Context, conn *client.Conn) error {
				return o.run(ctx, conn, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// run reads the page, prints it, and follows when asked. It reads conn's
// events itself: the items added while the page is read are kept and
// printed after it, those the page already holds left out.
func (o *teamFeedOptions) run(ctx context.Context, conn *client.Conn, stdout, stderr io.Writer) error {
	var backlog []client.Event
	goal, err := o.resolveGoal(ctx, conn, &backlog)
	if err != nil {
		return err
	}
	q := &protocol.TeamFeed{Header: teamHeader(protocol.TypeTeamFeed), GoalID: goal, Before: o.before, Limit: o.limit}
	resp, err := requestDraining(ctx, conn, q, &backlog)
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	var data protocol.TeamFeedData
	if len(resp.Data) > 0 {
		if err := json.Unmarshal(resp.Data, &data); err != nil {
			return fmt.Errorf("decode team.feed: %w", err)
		}
	}
	if data.Items == nil {
		data.Items = []protocol.TeamFeedItem{}
	}
	o.output.human(&data)
	if !o.follow && o.output.structured() {
		return o.output.write(stdout, data)
	}
	items := slices.Clone(data.Items)
	slices.Reverse(items) // oldest first
	names := feedNames{conn: conn, backlog: &backlog, names: map[string]string{}}
	last := ""
	for _, it := range items {
		if err := o.printItem(ctx, stdout, it, &names); err != nil {
			return err
		}
		last = max(last, it.FeedID)
	}
	if !o.follow {
		if len(items) == 0 && !o.output.structured() {
			fmt.Fprintln(stderr, "No feed items.")
		}
		if data.NextBefore != "" {
			fmt.Fprintf(stderr, "Older items: shardctl team feed --before %s\n", data.NextBefore)
		}
		return nil
	}
	// The events are taken from backlog first (those that came while the
	// page and the names were read), then from the connection.
	for {
		var ev client.Event
		if len(backlog) > 0 {
			ev, backlog = backlog[0], backlog[1:]
		} else {
			select {
			case e, ok := <-conn.Events():
				if !ok {
					return failed(connEnded(conn))
				}
				ev = e
			case <-ctx.Done():
				return nil
			}
		}
		m, ok := ev.Msg.(*protocol.TeamFeedAdded)
		if !ok || (goal != "" && m.Item.GoalID != goal) || m.Item.FeedID <= last {
			continue
		}
		it := m.Item
		o.output.human(&it)
		last = it.FeedID
		if err := o.printItem(ctx, stdout, it, &names); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// feedNames names the agents of feed lines, asking agent.status once per
// agent, while the events that come meanwhile are kept in backlog.
type feedNames struct {
	conn    *client.Conn
	backlog *[]client.Event
	names   map[string]string // agent id → name; "" once asked without one
}

// of is the agent's name, or its id when it has none (or is gone).
func (n *feedNames) of(ctx context.Context, id string) string {
	name, ok := n.names[id]
	if !ok {
		resp, err := requestDraining(ctx, n.conn, &protocol.AgentStatusCmd{Header: protocol.Header{Type: protocol.TypeAgentStatus, AgentID: id}}, n.backlog)
		var data protocol.AgentListData
		if err == nil && resp.Error == nil && json.Unmarshal(resp.Data, &data) == nil && len(data.Agents) == 1 {
			if name = agentName(data.Agents[0]); name == "-" {
				name = ""
			}
		}
		n.names[id] = safe(name)
	}
	return cmp.Or(n.names[id], id)
}

// resolveGoal resolves --goal while keeping the events that come meanwhile.
func (o *teamFeedOptions) resolveGoal(ctx context.Context, conn *client.Conn, backlog *[]client.Event) (string, error) {
	if o.goal == "" || wholeID(o.goal, ids.Goal) {
		return o.goal, nil
	}
	resp, err := requestDraining(ctx, conn, &protocol.TeamGoalList{Header: teamHeader(protocol.TypeTeamGoalList)}, backlog)
	if err != nil {
		return "", err
	}
	if resp.Error != nil {
		return "", resp.Error
	}
	var data protocol.TeamGoalListData
	if err := json.Unmarshal(resp.Data, &data); err != nil {
		return "", fmt.Errorf("decode team.goal.list: %w", err)
	}
	var all []string
	for _, gl := range data.Goals {
		all = append(all, gl.GoalID)
	}
	return matchTeamID(ids.Goal, o.goal, all)
}

// printItem prints one item: a line (its agent named), or with -o json
// one JSON line.
func (o *teamFeedOptions) printItem(ctx context.Context, w io.Writer, it protocol.TeamFeedItem, names *feedNames) error {
	if o.output.format == formatJSON {
		b, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("encode feed item: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if it.AgentID != "" && o.output.format != formatWide {
		it.AgentID = names.of(ctx, it.AgentID)
	}
	_, err := fmt.Fprintln(w, feedLine(it, o.g.clock, newPalette(w, o.g.noColor), o.output.format == formatWide))
	return err
}

// feedLine renders one feed item on one line; wide keeps the date.
func feedLine(it protocol.TeamFeedItem, clk clock, p palette, wide bool) string {
	at := clk.formatTime(it.At)
	if !wide && len(at) > 11 {
		at = at[11:] // the time of day
	}
	who := orDash(it.AgentID)
	if it.AgentID == "" && it.Kind == protocol.FeedUser {
		who = "you"
	}
	if it.To != "" {
		who += " -> " + it.To
	}
	return fmt.Sprintf("%s %s %s %s", p.dim(at), feedKind(p, it.Kind), who, truncate(it.Text, 400))
}

// feedKind colors a feed kind: decisions yellow, errors red.
func feedKind(p palette, k string) string {
	switch k {
	case protocol.FeedDecision:
		return p.paint(sgrYellow, k)
	case protocol.FeedError:
		return p.paint(sgrRed, k)
	case protocol.FeedMerge:
		return p.paint(sgrGreen, k)
	case protocol.FeedMessage, protocol.FeedUser:
		return p.paint(sgrCyan, k)
	}
	return orDash(k)
}
