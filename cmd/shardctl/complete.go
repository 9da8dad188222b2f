package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// completeTimeout bounds a completion's call to the daemon: a shell waits
// for it on every Tab.
const completeTimeout = time.Second

type completer = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective)

// askForCompletion runs fn against the daemon, quietly: a daemon that does
// not answer completes nothing.
func askForCompletion(cmd *cobra.Command, g *globalOptions, fn func(ctx context.Context, conn *client.Conn) []string) []string {
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	var out []string
	saved := g.timeout
	g.timeout = completeTimeout
	defer func() { g.timeout = saved }()
	_ = g.oneShot(ctx, func(ctx context.Context, conn *client.Conn) error {
		out = fn(ctx, conn)
		return nil
	})
	return out
}

// completeAgents completes agent ids (with their name and status) for the
// first argument, or for every argument when many is set.
func completeAgents(g *globalOptions, many bool) completer {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 && !many {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return askForCompletion(cmd, g, func(ctx context.Context, conn *client.Conn) []string {
			var data protocol.AgentListData
			if readAllAgents(ctx, conn, &data) != nil {
				return nil
			}
			var out []string
			for _, a := range data.Agents {
				out = append(out, fmt.Sprintf("%s\t%s (%s)", a.AgentID, agentName(a), orDash(string(a.Status))))
			}
			return out
		}), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeJobs completes the newest job ids and their runs' aliases.
func completeJobs(g *globalOptions, many bool) completer {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 && !many {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return askForCompletion(cmd, g, func(ctx context.Context, conn *client.Conn) []string {
			var data protocol.JobsListData
			q := &protocol.JobsList{Header: protocol.Header{Type: protocol.TypeJobsList}, Limit: defaultJobsLimit}
			if conn.Call(ctx, q, &data) != nil {
				return nil
			}
			var out []string
			seen := map[string]bool{}
			for _, j := range data.Jobs {
				out = append(out, fmt.Sprintf("%s\t%s %s", j.JobID, j.Strategy, j.State))
				for _, r := range j.Runs {
					if r.Alias != "" && !seen[r.Alias] {
						seen[r.Alias] = true
						out = append(out, fmt.Sprintf("%s\t%s %s", r.Alias, orDash(r.Name), r.State))
					}
				}
			}
			return out
		}), cobra.ShellCompDirectiveNoFileComp
	}
}
