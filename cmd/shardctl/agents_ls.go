package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/store"
)

// agentsLsOptions are the options of shardctl agents ls.
type agentsLsOptions struct {
	g      *globalOptions
	output outputOptions
	parent string
	// parentResolved: parent is already an agent id the daemon knows
	// (the daemon filters by it), so print does not look it up again.
	parentResolved bool
	state          string
	active         bool
	since          string
	limit          int
	// pageSize is how many agents one agent.list asks for.
	pageSize int
	// more: the daemon holds matching agents beyond the ones shown.
	more  bool
	watch bool
	// down maps each node of the cluster that is not alive to its health:
	// its agents are listed as it last published them.
	down map[string]protocol.NodeHealth
}

// AddFlags registers the agents ls flags on cmd.
func (o *agentsLsOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.output.AddFlags(fs)
	fs.StringVar(&o.parent, "parent", "", "only the children of this agent (id, name or alias)")
	fs.BoolVarP(&o.watch, "watch", "w", false, "print the list again after every change, until Ctrl-C")
	fs.BoolVar(&o.active, "active", false, "only live agents: a runtime starting, running or stopping, or a client attached")
	fs.StringVar(&o.since, "since", "", "only agents created within this long, e.g. 90s, 15m, 2h, 3d")
	fs.IntVar(&o.limit, "limit", 0, "show at most this many agents, oldest first (0: all)")
	fs.IntVar(&o.pageSize, "page-size", listPageSize, "ask the daemon for this many agents at a time")
	_ = fs.MarkHidden("page-size")
	fs.StringVar(&o.state, "state", "", "only agents in this runtime state (stopped, starting, running, stopping, failed) or status (idle, streaming, waiting_for_permission, waiting_for_ui, compacting, error)")
}

// agentStates are the values --state accepts.
var agentStates = []string{
	string(protocol.RuntimeStopped), string(protocol.RuntimeStarting), string(protocol.RuntimeRunning),
	string(protocol.RuntimeStopping), string(protocol.RuntimeFailed),
	string(protocol.StatusIdle), string(protocol.StatusStreaming), string(protocol.StatusWaitingForPermission),
	string(protocol.StatusWaitingForUI), string(protocol.StatusCompacting), string(protocol.StatusError),
}

func newAgentsLsCommand(g *globalOptions) *cobra.Command {
	o := &agentsLsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "ls [--parent ID] [--state S]",
		Aliases: []string{"list"},
		Short:   "List agents",
		Long: `List every durable agent (agent.list). The table shows AGENT_ID, NAME,
PARENT, STATUS, RUNTIME (runtime state), MODEL, CWD and CREATED (local
time); -o json|yaml prints {"agents":[...]} with the wire's AgentInfo fields.

--state matches either the runtime state or the status; --active keeps the
live agents and --since the recent ones. --limit bounds the list (oldest
first). shardctl reads the list from the daemon in pages of 200, following
each page's next_cursor.

With --offline the agents come from shard.db, read-only (the daemon must be
stopped): their runtime_state is "stopped" and their status is unknown
(empty).`,
		Annotations: map[string]string{offlineAnnotation: "yes"},
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			if o.state != "" && !slices.Contains(agentStates, o.state) {
				return usageErrorf("invalid --state %q: want one of %v", o.state, agentStates)
			}
			q := protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}, Active: o.active}
			if o.since != "" {
				d, err := parseSince(o.since)
				if err != nil {
					return usageErrorf("--since %q: %v", o.since, err)
				}
				q.SinceMs = o.g.clock.now().Add(-d).UnixMilli()
			}
			if o.limit < 0 {
				return usageErrorf("--limit must not be negative")
			}
			if o.g.offline {
				if o.watch {
					return usageErrorf("--watch needs the daemon; drop --offline")
				}
				return o.g.withOffline(cmd.Context(), func(st *store.Store) error {
					manifests, err := st.ListAgents()
					if err != nil {
						return err
					}
					data := protocol.AgentListData{Agents: []protocol.AgentInfo{}}
					for _, a := range manifests {
						// Offline every agent is stopped: none is active.
						if o.active || a.CreatedAt < q.SinceMs {
							continue
						}
						data.Agents = append(data.Agents, offlineAgent(a))
					}
					return o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), data)
				})
			}
			list := func(ctx context.Context, conn *client.Conn) (protocol.AgentListData, error) {
				if o.parent != "" && !o.parentResolved {
					// A name works as --parent; an agent that is not
					// there is an error, not an empty list.
					id, err := resolveKnownAgent(ctx, conn, o.parent)
					if err != nil {
						return protocol.AgentListData{}, err
					}
					o.parent, o.parentResolved = id, true
					q.ParentAgentID = id
				}
				data, more, err := fetchAgents(ctx, conn, q, o.keep, o.limit, o.pageSize)
				o.more = more
				o.down = nil
				if err == nil && slices.ContainsFunc(data.Agents, func(a protocol.AgentInfo) bool { return a.Node != "" }) {
					st, _ := client.ClusterStatus(ctx, conn)
					for _, n := range st.Nodes {
						if n.Health != protocol.NodeAlive {
							if o.down == nil {
								o.down = map[string]protocol.NodeHealth{}
							}
							o.down[n.Node] = n.Health
						}
					}
				}
				return data, err
			}
			if o.watch {
				if o.output.structured() {
					return usageErrorf("--watch prints tables only")
				}
				return o.g.listWatch(cmd.Context(), cmd.OutOrStdout(), func(ctx context.Context, conn *client.Conn) ([]string, error) {
					data, err := list(ctx, conn)
					if err != nil {
						return nil, err
					}
					return nil, o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), data)
				})
			}
			return o.g.oneShot(cmd.Context(), func(ctx context.Context, conn *client.Conn) error {
				data, err := list(ctx, conn)
				if err != nil {
					return err
				}
				return o.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), data)
			})
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// keep applies --parent and --state.
func (o *agentsLsOptions) keep(a protocol.AgentInfo) bool {
	if o.parent != "" && a.ParentAgentID != o.parent {
		return false
	}
	return o.state == "" || string(a.RuntimeState) == o.state || string(a.Status) == o.state
}

func (o *agentsLsOptions) print(stdout, stderr io.Writer, data protocol.AgentListData) error {
	if o.parent != "" && !o.parentResolved {
		// A name works as --parent; an agent that is not there is an
		// error, not an empty list.
		id, err := matchAgent(data.Agents, o.parent)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(data.Agents, func(a protocol.AgentInfo) bool { return a.AgentID == id }) {
			return protocol.Errorf(protocol.CodeNotFound, "no agent %q", o.parent)
		}
		o.parent = id
	}
	agents := []protocol.AgentInfo{}
	for _, a := range data.Agents {
		if o.keep(a) {
			agents = append(agents, a)
		}
	}
	if o.limit > 0 && len(agents) > o.limit {
		agents, o.more = agents[:o.limit], true
	}
	o.output.human(&agents)
	if o.output.structured() {
		return o.output.write(stdout, protocol.AgentListData{Agents: agents})
	}
	if len(agents) == 0 {
		fmt.Fprintln(stderr, "No agents.")
		return nil
	}
	p := newPalette(stdout, o.g.noColor)
	width := termWidth(stdout)
	st := o.output.style(o.g)
	var ids []string
	for _, a := range agents {
		ids = append(ids, a.AgentID, a.ParentAgentID)
	}
	st.shorten(ids)
	tw := newTableNoHeader(stdout, st.noHeaders)
	// NODE only in a cluster: a single shardd's agents carry no node.
	nodes := slices.ContainsFunc(agents, func(a protocol.AgentInfo) bool { return a.Node != "" })
	nodeHead := ""
	if nodes {
		nodeHead = "NODE\t"
	}
	fmt.Fprintln(tw, "AGENT_ID\tNAME\tPARENT\tSTATUS\tRUNTIME\tMODEL\t"+nodeHead+"CWD\tCREATED")
	for _, a := range agents {
		node := ""
		if nodes {
			node = orDash(safe(a.Node))
			if h, ok := o.down[a.Node]; ok {
				node += " (" + string(h) + ")"
			}
			node += "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s%s\t%s\n",
			st.agent(a.AgentID), agentName(a), st.agent(a.ParentAgentID), p.status(a.Status), orDash(string(a.RuntimeState)),
			orDash(strings.Trim(a.Provider+"/"+a.Model, "/")), node, orDash(fitPath(a.Cwd, 40, width)), st.when(o.g.clock, a.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write agents: %w", err)
	}
	if o.more {
		fmt.Fprintf(stderr, "(the %d oldest; --limit 0 shows all, --since the recent ones)\n", len(agents))
	}
	for _, n := range slices.Sorted(maps.Keys(o.down)) {
		if slices.ContainsFunc(agents, func(a protocol.AgentInfo) bool { return a.Node == n }) {
			fmt.Fprintf(stderr, "(node %s is %s: its agents are shown as it last published them; shardctl cluster status)\n", safe(n), o.down[n])
		}
	}
	return nil
}

// agentName is the best human name of an agent.
func agentName(a protocol.AgentInfo) string {
	switch {
	case a.Name != "":
		return a.Name
	case a.DisplayName != "":
		return a.DisplayName
	case a.Alias != "":
		return a.Alias
	case a.Title != "":
		return a.Title
	}
	return "-"
}

// fitPath shortens a path from the left on a terminal ("…/deep/dir").
func fitPath(s string, n, width int) string {
	r := []rune(s)
	if width <= 0 || len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}
