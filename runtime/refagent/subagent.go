package refagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/daemontool"
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

// Actions of the subagent tool: the daemontool actions it offers (not
// steer, which the model needs not: a child's report reaches its turn).
const (
	subagentCreate = daemontool.ActionCreate
	subagentWait   = daemontool.ActionWait
	subagentStatus = daemontool.ActionStatus
	subagentStop   = daemontool.ActionStop
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
// command and, for the daemon's refusal, its code (daemontool.Do). what
// names the tool in the log line of a call that failed for another reason.
func daemonResult(ctx context.Context, socket string, cmd protocol.Command, log *slog.Logger, what string) toolOutput {
	o := daemontool.Do(ctx, socket, cmd)
	if o.Err != nil {
		log.Warn(what+" call failed", "command", cmd.Head().Type, slog.Any("err", o.Err))
	}
	if o.Failure != "" {
		return errorOutput("%s", o.Failure)
	}
	return toolOutput{content: protocol.ToolResultContent{Kind: "json", Value: o.Value}}
}

// subagentCommand builds and validates the daemon command for the tool's
// arguments (daemontool.SubagentCommand, the action in "action", create by
// default). Arguments the action does not use are ignored.
func subagentCommand(parent string, args map[string]any) (protocol.Command, error) {
	action, ok := args["action"].(string)
	if !ok && args["action"] != nil {
		return nil, errors.New(`argument "action" must be a string`)
	}
	switch action {
	case "":
		action = subagentCreate
	case subagentCreate, subagentWait, subagentStatus, subagentStop:
	default:
		return nil, fmt.Errorf(`argument "action": unknown action %q (want create, wait, status or stop)`, action)
	}
	return daemontool.SubagentCommand(action, parent, args)
}
