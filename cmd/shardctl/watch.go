package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

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
		Use:   "watch AGENT...",
		Short: "Print agents' events as they happen",
		Long: `Attach to each AGENT as an observer (never answering its prompts) and print
every event about them, one line each: "<agent_id> <type> <summary>". The
summary names statuses, ids, tool names and text deltas, never tool
arguments or output. -o json prints each event's raw JSON instead.

Runs until Ctrl-C (exit 0) or until the daemon closes the connection (exit 0
on a clean close, 1 otherwise).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), args, cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func (o *watchOptions) run(ctx context.Context, agents []string, w io.Writer) error {
	conn, err := o.g.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()

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

	var early []client.Event
	ready := false
	becomeReady := func(err error) error {
		if err != nil {
			return err
		}
		ready = true
		for _, ev := range early {
			if err := o.print(w, agents, ev); err != nil {
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
				if errors.Is(conn.Err(), io.EOF) {
					return nil
				}
				return fmt.Errorf("connection to the daemon lost: %w", conn.Err())
			}
			if !ready {
				early = append(early, ev)
				continue
			}
			if err := o.print(w, agents, ev); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// print writes one event about a watched agent; others are skipped.
func (o *watchOptions) print(w io.Writer, agents []string, ev client.Event) error {
	h := ev.Msg.Head()
	if !slices.Contains(agents, h.AgentID) {
		return nil
	}
	var err error
	if o.output.json() {
		_, err = fmt.Fprintf(w, "%s\n", ev.Raw)
	} else if s := summarize(ev.Msg); s != "" {
		_, err = fmt.Fprintf(w, "%s %s %s\n", h.AgentID, h.Type, s)
	} else {
		_, err = fmt.Fprintf(w, "%s %s\n", h.AgentID, h.Type)
	}
	if err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}
