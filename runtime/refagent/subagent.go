package refagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// The subagent tool lets the model run background jobs of child agents
// through the daemon (docs/protocol.md §10.3): each call dials Options.Socket,
// sends one subagent.* command with Options.AgentID as parent_agent_id,
// waits for its response and closes the connection. Its arguments:
//
//	action    "create" (default) | "wait" | "status" | "stop"
//	create:   name + task (single), or tasks:[{name,task}…] + strategy
//	          ("parallel", the default for a batch, or "chain"); tools:[…]
//	          and skills:[…] narrow what the children get (default: the
//	          parent's)
//	wait:     handles:[…] (a single string is accepted), mode "any"|"all"
//	          (default all), timeout in seconds (omitted: until done; 0: poll)
//	status:   targets:[…] (optional: omitted lists the latest jobs)
//	stop:     handle
//
// A handle is a job, run or agent id or an alias, as the daemon returned
// them. The result is {kind:"json", value:<the response data>}; a daemon
// error becomes a tool error carrying its code and message.
//
// Gating. The tool is reported with read_only false, because it changes
// state (it starts durable agents), yet it asks no permission: creating a
// subagent is a delegation, not a change to files. Every child runs its own
// permission gate, and its requests route up the hierarchy to a responder
// (docs/protocol.md §6.3), so asking before the delegation would ask twice and
// protect nothing. Plan mode does not refuse it either; instead children are
// created in the parent's current mode, so a planning agent's children plan
// too.

// Actions of the subagent tool.
const (
	subagentCreate = "create"
	subagentWait   = "wait"
	subagentStatus = "status"
	subagentStop   = "stop"
)

// Bounds of one subagent call.
const (
	// subagentDialTimeout bounds connecting to the daemon and reading its
	// hello.
	subagentDialTimeout = 5 * time.Second
	// subagentCallTimeout bounds the daemon's answer to create, status and
	// stop, which it gives at once, and is added to a wait's own timeout.
	// A wait without a timeout is bounded by abort only.
	subagentCallTimeout = 30 * time.Second
	// maxBoundedWait is the longest wait timeout that also bounds the
	// call; a longer one is left to the daemon and abort.
	maxBoundedWait = 24 * time.Hour
)

// noDaemonMessage is the result of every subagent call in a runtime that
// has no daemon to talk to.
const noDaemonMessage = "subagents need the daemon: this runtime has no daemon socket (SHARD_SOCKET) " +
	"or agent id (SHARD_AGENT_ID); run the agent under shardd to use subagent jobs"

// subagentClient makes the subagent tool's calls for one runtime. It is
// immutable and safe for concurrent use.
type subagentClient struct {
	socket  string // Options.Socket
	agentID string // Options.AgentID, the parent of the jobs it creates
	log     *slog.Logger
	// mode returns the agent's current mode, which children are created
	// in; it takes the runtime's lock.
	mode func() string
}

// tool is the `subagent` tool of this runtime.
func (s subagentClient) tool() tool {
	return daemonTool{
		spec:     provider.ToolSpec{Name: toolSubagent, Description: subagentDescription, Schema: subagentSchema},
		noDaemon: noDaemonMessage, what: "subagent",
		socket: s.socket, agentID: s.agentID, log: s.log,
		command: subagentCommand,
		// Children are created in the parent's current mode. Aborting the
		// turn closes the connection: the daemon then drops a pending
		// wait and nothing else (the jobs go on).
		prepare: func(cmd protocol.Command) {
			if c, ok := cmd.(*protocol.SubagentCreate); ok {
				c.Mode = s.mode()
			}
		},
	}.tool()
}

// daemonTool is a tool each call of which is one daemon command (subagent,
// team): command builds and validates it from the model's arguments (the
// check before the gate, then again for the call), prepare (optional)
// completes it at call time, and daemonResult sends it and makes the
// output. Aborting the turn cancels the call's ctx, which closes the
// connection. Without a daemon socket or agent id the tool is unavailable
// with noDaemon.
type daemonTool struct {
	spec            provider.ToolSpec
	noDaemon, what  string
	socket, agentID string
	log             *slog.Logger
	command         func(agentID string, args map[string]any) (protocol.Command, error)
	prepare         func(protocol.Command)
}

// tool is the runtime's tool of d, ungated (see the subagent and team
// tools' comments on why).
func (d daemonTool) tool() tool {
	tl := tool{name: d.spec.Name, ungated: true, spec: d.spec, check: d.check, run: d.run}
	if d.socket == "" || d.agentID == "" {
		tl.unavailable = d.noDaemon
	}
	return tl
}

func (d daemonTool) check(args map[string]any) error {
	if _, err := d.command(d.agentID, args); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

func (d daemonTool) run(ctx context.Context, args map[string]any) toolOutput {
	cmd, err := d.command(d.agentID, args)
	if err != nil { // checked before; kept for safety
		return errorOutput("invalid arguments: %v", err)
	}
	if d.prepare != nil {
		d.prepare(cmd)
	}
	return daemonResult(ctx, d.socket, cmd, d.log, d.what)
}

// daemonResult sends cmd to the daemon at socket and makes the tool's
// output of the answer, for the tools that are daemon commands (subagent,
// team): the response data as {kind:"json"}, or a tool error naming the
// command and, for the daemon's refusal, its code. what names the tool in
// the log line of a call that failed for another reason.
func daemonResult(ctx context.Context, socket string, cmd protocol.Command, log *slog.Logger, what string) toolOutput {
	typ := cmd.Head().Type
	data, err := callDaemon(ctx, socket, cmd)
	var pe *protocol.Error
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return errorOutput("%s aborted", typ)
	case errors.As(err, &pe):
		return errorOutput("%s failed: %s: %s", typ, pe.Code, pe.Message)
	default:
		log.Warn(what+" call failed", "command", typ, slog.Any("err", err))
		return errorOutput("%s failed: %v", typ, err)
	}
	var value any
	if len(data) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // ids and epoch milliseconds stay exact
		if err := dec.Decode(&value); err != nil {
			return errorOutput("%s: undecodable response data: %v", typ, err)
		}
	}
	return toolOutput{content: protocol.ToolResultContent{Kind: "json", Value: value}}
}

// callDaemon dials the daemon at socket, sends cmd, returns the response
// data and closes the connection. A response with success false is
// returned as its *protocol.Error.
func callDaemon(ctx context.Context, socket string, cmd protocol.Command) (json.RawMessage, error) {
	dialCtx, cancelDial := context.WithTimeout(ctx, subagentDialTimeout)
	conn, err := client.Dial(dialCtx, socket)
	cancelDial()
	if err != nil {
		return nil, fmt.Errorf("reach the daemon: %w", err)
	}
	// The daemon also sends this connection the parent's
	// subagent_run_changed events; nobody reads them, but they must be
	// drained so that the response is never stuck behind a full buffer.
	var drain sync.WaitGroup
	drain.Go(func() {
		for range conn.Events() {
		}
	})
	defer func() {
		_ = conn.Close() // ends Events, and a pending wait at the daemon
		drain.Wait()
	}()

	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if bound := answerBound(cmd); bound > 0 {
		callCtx, cancel = context.WithTimeout(ctx, bound)
	}
	defer cancel()
	resp, err := conn.Request(callCtx, cmd)
	if err != nil {
		return nil, err
	}
	return resp.Data, nil
}

// answerBound is how long the daemon may take to answer cmd; 0 means no
// bound (a wait without a timeout, or with one too long to matter).
func answerBound(cmd protocol.Command) time.Duration {
	w, ok := cmd.(*protocol.SubagentWait)
	switch {
	case !ok:
		return subagentCallTimeout
	case w.Timeout == nil || *w.Timeout > maxBoundedWait.Seconds():
		return 0
	}
	return time.Duration(*w.Timeout*float64(time.Second)) + subagentCallTimeout
}

// subagentCommand builds and validates the daemon command for the tool's
// arguments. Arguments the action does not use are ignored.
func subagentCommand(parent string, args map[string]any) (protocol.Command, error) {
	action, err := optString(args, "action")
	if err != nil {
		return nil, err
	}
	var cmd protocol.Command
	switch action {
	case "", subagentCreate:
		cmd, err = createCommand(parent, args)
	case subagentWait:
		cmd, err = waitCommand(parent, args)
	case subagentStatus:
		var targets []string
		if targets, err = stringList(args, "targets"); err == nil {
			cmd = &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent, Targets: targets}
		}
	case subagentStop:
		var handle string
		if handle, err = optString(args, "handle"); err == nil {
			cmd = &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop}, ParentAgentID: parent, Handle: handle}
		}
	default:
		return nil, fmt.Errorf(`argument "action": unknown action %q (want create, wait, status or stop)`, action)
	}
	if err != nil {
		return nil, err
	}
	if err := cmd.Validate(); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, errors.New(pe.Message) // the field names are the argument names
		}
		return nil, err
	}
	return cmd, nil
}

func createCommand(parent string, args map[string]any) (*protocol.SubagentCreate, error) {
	c := &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent}
	var err error
	if c.Name, err = optString(args, "name"); err != nil {
		return nil, err
	}
	if c.Task, err = optString(args, "task"); err != nil {
		return nil, err
	}
	strategy, err := optString(args, "strategy")
	if err != nil {
		return nil, err
	}
	c.Strategy = protocol.JobStrategy(strategy)
	if c.Tasks, err = taskList(args, "tasks"); err != nil {
		return nil, err
	}
	if len(c.Tasks) > 0 && c.Strategy == "" {
		c.Strategy = protocol.StrategyParallel // a batch's default
	}
	if c.Tools, err = stringList(args, "tools"); err != nil {
		return nil, err
	}
	if c.Skills, err = stringList(args, "skills"); err != nil {
		return nil, err
	}
	// A model id names its provider too, so a lead on one provider can
	// start workers on another (docs/protocol.md §10.1 provider/model).
	if c.Model, err = optString(args, "model"); err != nil {
		return nil, err
	}
	return c, nil
}

func waitCommand(parent string, args map[string]any) (*protocol.SubagentWait, error) {
	w := &protocol.SubagentWait{Header: protocol.Header{Type: protocol.TypeSubagentWait}, ParentAgentID: parent}
	var err error
	if w.Handles, err = stringList(args, "handles"); err != nil {
		return nil, err
	}
	if w.Mode, err = optString(args, "mode"); err != nil {
		return nil, err
	}
	if w.Timeout, err = optSeconds(args, "timeout"); err != nil {
		return nil, err
	}
	return w, nil
}

// ---- argument decoding ----
//
// Arguments come from a model's JSON (numbers as float64) or from a sim
// directive (numbers as json.Number). Absent and null are the same.

// optString returns args[key] as a string, "" when absent.
func optString(args map[string]any, key string) (string, error) {
	switch v := args[key].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("argument %q must be a string", key)
}

// stringList returns args[key] as a list of strings; a single string is a
// list of one.
func stringList(args map[string]any, key string) ([]string, error) {
	switch v := args[key].(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []string:
		return v, nil
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("argument %q: element %d must be a string", key, i)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("argument %q must be a list of strings", key)
}

// taskList returns args[key] as a list of {name, task} objects.
func taskList(args map[string]any, key string) ([]protocol.TaskSpec, error) {
	switch v := args[key].(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]protocol.TaskSpec, len(v))
		for i, e := range v {
			obj, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("argument %q: element %d must be an object {name, task}", key, i)
			}
			var err error
			if out[i].Name, err = optString(obj, "name"); err != nil {
				return nil, fmt.Errorf("argument %q: element %d: %w", key, i, err)
			}
			if out[i].Task, err = optString(obj, "task"); err != nil {
				return nil, fmt.Errorf("argument %q: element %d: %w", key, i, err)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("argument %q must be a list of {name, task} objects", key)
}

// optSeconds returns args[key] as a number of seconds, nil when absent. A
// numeric string is accepted.
func optSeconds(args map[string]any, key string) (*float64, error) {
	var f float64
	var err error
	switch v := args[key].(type) {
	case nil:
		return nil, nil
	case float64:
		f = v
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case json.Number:
		f, err = v.Float64()
	case string:
		f, err = strconv.ParseFloat(v, 64)
	default:
		err = errors.New("not a number")
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("argument %q must be a number of seconds", key)
	}
	return &f, nil
}
