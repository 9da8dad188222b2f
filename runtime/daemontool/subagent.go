package daemontool

import (
	"errors"
	"fmt"

	"github.com/shard-dev/shard/protocol"
)

// Actions on subagent jobs, each one subagent.* command (docs/protocol.md
// §10.3).
const (
	ActionCreate = "create" // subagent.create
	ActionWait   = "wait"   // subagent.wait
	ActionStatus = "status" // subagent.status
	ActionStop   = "stop"   // subagent.stop
	ActionSteer  = "steer"  // subagent.steer
)

// SubagentCommand builds and validates the subagent.* command of action for
// a model's arguments, parent being the calling agent (the command's
// parent_agent_id). Arguments the action does not use are ignored:
//
//	create:  name + task (single), or tasks:[{name,task}…] + strategy
//	         ("parallel", the default for a batch, or "chain"); tools:[…],
//	         skills:[…] and model narrow or choose what the children get;
//	         runtime (a runtime profile) and isolation ("workspace") as
//	         subagent.create takes them
//	wait:    handles:[…] (a single string is accepted), mode "any"|"all",
//	         timeout in seconds (omitted: until done; 0: poll)
//	status:  targets:[…] (omitted: the latest jobs)
//	stop:    handle
//	steer:   target, message
//
// An invalid argument is an error naming it (the command's field names are
// the argument names).
func SubagentCommand(action, parent string, args map[string]any) (protocol.Command, error) {
	var cmd protocol.Command
	var err error
	switch action {
	case ActionCreate:
		cmd, err = createCommand(parent, args)
	case ActionWait:
		cmd, err = waitCommand(parent, args)
	case ActionStatus:
		var targets []string
		if targets, err = stringList(args, "targets"); err == nil {
			cmd = &protocol.SubagentStatus{Header: protocol.Header{Type: protocol.TypeSubagentStatus}, ParentAgentID: parent, Targets: targets}
		}
	case ActionStop:
		var handle string
		if handle, err = optString(args, "handle"); err == nil {
			cmd = &protocol.SubagentStop{Header: protocol.Header{Type: protocol.TypeSubagentStop}, ParentAgentID: parent, Handle: handle}
		}
	case ActionSteer:
		s := &protocol.SubagentSteer{Header: protocol.Header{Type: protocol.TypeSubagentSteer}, ParentAgentID: parent}
		err = readStrings(args, &s.Target, "target", &s.Message, "message")
		cmd = s
	default:
		return nil, fmt.Errorf("unknown subagent action %q", action)
	}
	if err != nil {
		return nil, err
	}
	return validated(cmd)
}

// validated returns cmd once its Validate passes; a refusal's message
// names the field, which is the argument's name.
func validated(cmd protocol.Command) (protocol.Command, error) {
	if err := cmd.Validate(); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, errors.New(pe.Message)
		}
		return nil, err
	}
	return cmd, nil
}

func createCommand(parent string, args map[string]any) (*protocol.SubagentCreate, error) {
	c := &protocol.SubagentCreate{Header: protocol.Header{Type: protocol.TypeSubagentCreate}, ParentAgentID: parent}
	var strategy, isolation string
	if err := readStrings(args, &c.Name, "name", &c.Task, "task", &strategy, "strategy",
		&c.Runtime, "runtime", &isolation, "isolation"); err != nil {
		return nil, err
	}
	c.Strategy = protocol.JobStrategy(strategy)
	c.Isolation = protocol.Isolation(isolation)
	var err error
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
			if err := readStrings(obj, &out[i].Name, "name", &out[i].Task, "task"); err != nil {
				return nil, fmt.Errorf("argument %q: element %d: %w", key, i, err)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("argument %q must be a list of {name, task} objects", key)
}
