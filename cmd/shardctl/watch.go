package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// watchOptions are the options of shardctl watch.
type watchOptions struct {
	g      *globalOptions
	output outputOptions
}

// AddFlags registers the watch flags on cmd.
func (o *watchOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
}

func newWatchCommand(g *globalOptions) *cobra.Command {
	o := &watchOptions{g: g}
	cmd := &cobra.Command{
		Use:   "watch [AGENT...]",
		Short: "Print agent activity and run changes as they happen",
		Long: `Print events as they happen, one line each: "<agent_id> <type> <summary>".

Without arguments, watch the whole daemon: every agent's coarse activity
(agent_activity), status and runtime changes (agent_status_changed), agents
spawned and exited, and every subagent run's state changes
(subagent_run_changed, for every parent, including parents that appear
later). None of these carry prompts, model text or tool arguments.

With AGENT arguments, attach to each as an observer (never answering its
prompts) and print every event about them: the summary names statuses, ids,
tool names and text deltas, never tool arguments or output.

-o json prints each event's raw JSON; -o yaml prints each as a YAML
document.

Runs until Ctrl-C (exit 0) or until the daemon closes the connection (exit 0
on a clean close, 1 otherwise).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), args, cmd.OutOrStdout())
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, true)
	o.AddFlags(cmd)
	return cmd
}

func (o *watchOptions) run(ctx context.Context, agents []string, w io.Writer) error {
	conn, err := o.g.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if len(agents) == 0 {
		return o.watchAll(ctx, conn, w)
	}

	// Drain events while attaching so the reader never stalls; the first
	// ones are kept and printed once attached, in order.
	attached := make(chan error, 1)
	go func() {
		for _, id := range agents {
			msg := &protocol.AgentAttach{
				Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id},
				Role:   protocol.RoleObserver,
			}
			if err := conn.Call(ctx, msg, nil); err != nil {
				attached <- fmt.Errorf("attach %s: %w", id, err)
				return
			}
		}
		attached <- nil
	}()

	keep := func(ev client.Event) bool { return slices.Contains(agents, ev.Msg.Head().AgentID) }
	var early []client.Event
	ready := false
	becomeReady := func(err error) error {
		if err != nil {
			return err
		}
		ready = true
		for _, ev := range early {
			if err := o.print(w, ev, keep); err != nil {
				return err
			}
		}
		early = nil
		return nil
	}
	for {
		select {
		case err := <-attached:
			if err := becomeReady(err); err != nil {
				return err
			}
		case ev, ok := <-conn.Events():
			if !ok {
				if !ready {
					// The attach calls end too, with their responses
					// or with the connection's error.
					if err := becomeReady(<-attached); err != nil {
						return err
					}
				}
				return connEnded(conn)
			}
			if !ready {
				early = append(early, ev)
				continue
			}
			if err := o.print(w, ev, keep); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// connEnded is the outcome of a watch whose connection ended: nil when the
// daemon closed it cleanly.
func connEnded(conn *client.Conn) error {
	if errors.Is(conn.Err(), io.EOF) {
		return nil
	}
	return fmt.Errorf("connection to the daemon lost: %w", conn.Err())
}

// watchAll prints the daemon-wide events. Run changes go only to
// connections that speak for a parent (spec §10.3), so watch asks
// subagent.status of every parent it learns of — from agent.list and
// jobs.list at the start, from agent_spawned later — which subscribes it.
func (o *watchOptions) watchAll(ctx context.Context, conn *client.Conn, w io.Writer) error {
	parents := make(chan string, 256)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// seen holds the parents watch already speaks for.
		seen := map[string]bool{}
		subscribe := func(parent string) {
			if parent == "" || seen[parent] {
				return
			}
			seen[parent] = true
			// Errors (an agent deleted meanwhile, the connection
			// closing) are ignored: watching goes on.
			msg := &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent}
			_ = conn.Call(ctx, msg, nil)
		}
		var agents protocol.AgentListData
		if err := conn.Call(ctx, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &agents); err == nil {
			for _, a := range agents.Agents {
				subscribe(a.ParentAgentID)
			}
		}
		var jobs protocol.JobsListData
		if err := conn.Call(ctx, &protocol.JobsList{Header: protocol.Header{Type: protocol.TypeJobsList}}, &jobs); err == nil {
			for _, j := range jobs.Jobs {
				subscribe(j.ParentAgentID)
			}
		}
		for p := range parents {
			subscribe(p)
		}
	}()
	defer func() {
		conn.Close() // ends a call in flight
		close(parents)
		wg.Wait()
	}()
	all := func(client.Event) bool { return true }
	for {
		select {
		case ev, ok := <-conn.Events():
			if !ok {
				return connEnded(conn)
			}
			if m, ok := ev.Msg.(*protocol.AgentSpawned); ok && m.Info.ParentAgentID != "" {
				select {
				case parents <- m.Info.ParentAgentID:
				default: // a burst of spawns: the parents repeat, and the list catches up
				}
			}
			if _, ok := ev.Msg.(*protocol.Response); ok {
				continue // a late answer to a subscription
			}
			if err := o.print(w, ev, all); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// print writes one event that keep accepts.
func (o *watchOptions) print(w io.Writer, ev client.Event, keep func(client.Event) bool) error {
	if !keep(ev) {
		return nil
	}
	h := ev.Msg.Head()
	var err error
	switch {
	case o.output.format == formatJSON:
		_, err = fmt.Fprintf(w, "%s\n", ev.Raw)
	case o.output.format == formatYAML:
		if _, err = io.WriteString(w, "---\n"); err == nil {
			err = writeYAML(w, json.RawMessage(ev.Raw))
		}
	default:
		if s := summarize(ev.Msg); s != "" {
			_, err = fmt.Fprintf(w, "%s %s %s\n", orDash(h.AgentID), h.Type, s)
		} else {
			_, err = fmt.Fprintf(w, "%s %s\n", orDash(h.AgentID), h.Type)
		}
	}
	if err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}
