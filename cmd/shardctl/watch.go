package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// watchOptions are the options of shardctl watch.
type watchOptions struct {
	g         *globalOptions
	output    outputOptions
	reconnect time.Duration

	// names maps agent ids to names, learned from attach, agent.list and
	// agent_spawned (the watch loop and the attach goroutine share it).
	mu    sync.Mutex
	names map[string]string
}

// AddFlags registers the watch flags on cmd.
func (o *watchOptions) AddFlags(cmd *cobra.Command) {
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().DurationVar(&o.reconnect, "reconnect", defaultReconnect, "when the connection is lost, keep reconnecting (with backoff) for this long; 0 exits at once")
}

// learn records an agent's name for the lines.
func (o *watchOptions) learn(a protocol.AgentInfo) {
	if n := agentName(a); n != "-" && a.AgentID != "" {
		o.mu.Lock()
		o.names[a.AgentID] = n
		o.mu.Unlock()
	}
}

// who is an agent's id with its name, "agent-01(builder)", for a line.
func (o *watchOptions) who(id string) string {
	if id == "" {
		return "-"
	}
	o.mu.Lock()
	n := o.names[id]
	o.mu.Unlock()
	if n == "" {
		return safe(id)
	}
	return safe(id) + "(" + safe(n) + ")"
}

func newWatchCommand(g *globalOptions) *cobra.Command {
	o := &watchOptions{g: g}
	cmd := &cobra.Command{
		Use:   "watch [AGENT...]",
		Short: "Print agent activity and run changes as they happen",
		Long: `Print events as they happen, one line each:
"<time> <agent_id>(<name>) <type> <summary>" (the name when watch knows it).

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

When the connection is lost (the daemon stopped, restarted or died), watch
says so on stderr and reconnects with backoff for up to --reconnect (then
attaches and subscribes again; events in between are not replayed).

Runs until Ctrl-C (exit 0); exits 1 when the connection is lost and does not
come back within --reconnect.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.output.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.ValidArgsFunction = completeAgents(g, true)
	o.AddFlags(cmd)
	return cmd
}

// errConnLost marks a watch session whose connection ended: watch
// reconnects (see reconnect) instead of failing.
type errConnLost struct{ err error }

func (e *errConnLost) Error() string { return e.err.Error() }
func (e *errConnLost) Unwrap() error { return e.err }

func (o *watchOptions) run(ctx context.Context, agents []string, w, errw io.Writer) error {
	o.names = map[string]string{}
	var rc reconnector
	for attempt := 0; ; attempt++ {
		conn, err := o.g.connect(ctx)
		if err != nil {
			if attempt == 0 || ctx.Err() != nil {
				return err // never connected: exit 3, as every command
			}
			if werr := rc.wait(ctx, o.reconnect); werr != nil {
				// %v, not %w: this is a lost connection (exit 1), not an
				// unreachable daemon at the start (exit 3).
				return failed(fmt.Errorf("connection to the daemon lost, and no reconnect within %s: %v", o.reconnect, err))
			}
			continue
		}
		if attempt > 0 {
			fmt.Fprintln(errw, "shardctl: reconnected")
			rc.reset()
		}
		err = o.session(ctx, conn, agents, w)
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

// session watches over one connection until it ends (*errConnLost), ctx
// ends (nil) or a command fails.
func (o *watchOptions) session(ctx context.Context, conn *client.Conn, agents []string, w io.Writer) error {
	if len(agents) == 0 {
		return o.watchAll(ctx, conn, w)
	}

	// Drain events while attaching so the reader never stalls; the first
	// ones are kept and printed once attached, in order.
	attached := make(chan error, 1)
	go func() {
		for i, handle := range agents {
			id, err := resolveAgent(ctx, conn, handle)
			if err != nil {
				attached <- err
				return
			}
			agents[i] = id
			msg := &protocol.AgentAttach{
				Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id},
				Role:   protocol.RoleObserver,
			}
			var data protocol.AgentAttachData
			if err := conn.Call(ctx, msg, &data); err != nil {
				attached <- fmt.Errorf("attach %s: %w", id, err)
				return
			}
			o.learn(data.Info)
		}
		attached <- nil
	}()

	// agents is rewritten with resolved ids by the goroutine above; keep
	// runs only once it is done (early events wait for ready).
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
					if err := becomeReady(<-attached); err != nil && !isConnErr(conn) {
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

// isConnErr reports whether the connection has failed (so a failed call
// is the connection's failure, not the daemon's answer).
func isConnErr(conn *client.Conn) bool { return conn.Err() != nil }

// connEnded is the outcome of a watch whose connection ended, whether the
// daemon closed it (stopped, or died) or it broke: a lost connection,
// which watch reconnects, and which fails it (exit 1) when it cannot.
func connEnded(conn *client.Conn) error {
	if errors.Is(conn.Err(), io.EOF) {
		return &errConnLost{err: errors.New("the daemon closed the connection")}
	}
	return &errConnLost{err: fmt.Errorf("connection to the daemon lost: %w", conn.Err())}
}

// watchAll prints the daemon-wide events. Run changes go only to
// connections that speak for a parent (docs/protocol.md §10.3), so watch asks
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
		if err := readAllAgents(ctx, conn, &agents); err == nil {
			for _, a := range agents.Agents {
				o.learn(a)
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
			if m, ok := ev.Msg.(*protocol.AgentSpawned); ok {
				o.learn(m.Info)
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

// watchTimeLayout stamps watch lines (local time of day, as tail and
// kubectl do; -o json carries the raw event for exact times).
const watchTimeLayout = "15:04:05"

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
		// Terminal safety (see sanitize.go); streamed text is quoted by
		// summarize instead, which escapes it whole.
		var text string
		delta, isDelta := ev.Msg.(*protocol.MessageDelta)
		if isDelta {
			text = delta.TextDelta
		}
		safeAll(&ev.Msg)
		if isDelta {
			delta.TextDelta = text
		}
		stamp := o.g.clock.now().In(o.g.clock.loc).Format(watchTimeLayout)
		if s := summarize(ev.Msg); s != "" {
			_, err = fmt.Fprintf(w, "%s %s %s %s\n", stamp, o.who(h.AgentID), safe(h.Type), s)
		} else {
			_, err = fmt.Fprintf(w, "%s %s %s\n", stamp, o.who(h.AgentID), safe(h.Type))
		}
	}
	if err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}
