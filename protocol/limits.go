package protocol

import "fmt"

// Limits on what a client controls (docs/protocol.md §11). The record bound
// (DefaultMaxRecord, 32 MiB) keeps one message from exhausting memory while
// it is read; these keep a message that fits from being stored forever,
// broadcast to every connection (agent_spawned carries the name) or
// repeated in every agent.list. Each is a Validate-time check, so the daemon
// refuses an oversize command before any side effect, and shardctl and the
// runtime's subagent tool, which validate before they send, refuse it
// locally with the same message.
//
// A refusal is INVALID_REQUEST whose message names the field and the limit
// (`field "name": 300 bytes, limit 256 bytes`) and whose data is a
// LimitData. Lengths are in bytes of the UTF-8 text, not in characters:
// that is what is stored and sent. docs/protocol.md lists every limit.
const (
	// MaxIDLen bounds every identifier a client sends: the command id,
	// agent_id, parent_agent_id, workspace_id, session ids, request_id,
	// choice_id, token_id, from_entry_id, and the handles that name a job,
	// run, agent or alias (subagent.wait/status/stop/steer/relaunch,
	// jobs.show). Daemon ids are under 64 bytes; 256 leaves room for a
	// client's own correlation ids (a UUID, a path-like key).
	MaxIDLen = 256

	// MaxNameLen bounds names: an agent's name, a subagent task's name, a
	// workspace's name, model, provider, mode, reasoning effort, image type
	// and MIME type, each tool and skill name. A name is shown in one table
	// cell and travels in every agent_spawned and agent.list; 256 bytes is
	// far more than any of them needs.
	MaxNameLen = 256

	// MaxLabelLen bounds a workspace's label and title (shown like a name).
	MaxLabelLen = 256

	// MaxRefLen bounds a git ref argument (workspace branch, base_ref,
	// integration_target): a branch is a path below .git/refs, and 255 bytes
	// is the usual file-name limit of one path component.
	MaxRefLen = 255

	// MaxPathLen bounds a cwd: PATH_MAX on Linux.
	MaxPathLen = 4096

	// MaxTextLen bounds message and task text: prompt and steer messages
	// (follow_up is a prompt's streaming_behavior), subagent task text,
	// subagent.steer's message and subagent.relaunch's task, and a
	// ui_response value. A prompt is kept in the session transcript and a
	// task in the job record for good; 1 MiB is some 250 000 tokens, more
	// than a model's context takes in one message.
	MaxTextLen = 1 << 20

	// MaxReasonLen bounds a permission_response's reason, which the
	// runtime hands to the model with the refusal.
	MaxReasonLen = 4096

	// MaxCommitMessageLen bounds workspace.merge's commit message.
	MaxCommitMessageLen = 64 << 10

	// MaxTasks bounds the tasks of one subagent.create batch, whatever a
	// launch policy or jobs.max_tasks allows (those are per-daemon limits
	// below this one; this one bounds the size of one command).
	MaxTasks = 64

	// MaxHandles bounds the handles of one subagent.wait and the targets of
	// one subagent.status.
	MaxHandles = 64

	// MaxListLen bounds agent.create's tools and skills lists.
	MaxListLen = 64

	// MaxImages bounds the images of one prompt or steer. Each is bounded
	// by MaxImageBytes (image.go), all of them by the record.
	MaxImages = 16
)

// Units of a LimitData.
const (
	UnitBytes = "bytes"
	UnitItems = "items"
)

// LimitData is the data of an INVALID_REQUEST refusing a value over a limit,
// so that a program can tell which field and how much is allowed without
// parsing the message. Field is the JSON path of the value ("tasks[2].name").
type LimitData struct {
	Field string `json:"field"`
	Limit int    `json:"limit"`
	Unit  string `json:"unit"`
}

// overLimit is the refusal of a value of n units over limit.
func overLimit(field string, n, limit int, unit string) error {
	return &Error{
		Code:    CodeInvalidRequest,
		Message: fmt.Sprintf("field %q: %d %s, limit %d %s", field, n, unit, limit, unit),
		Data:    LimitData{Field: field, Limit: limit, Unit: unit},
	}
}

// maxLen refuses a string longer than limit bytes.
func maxLen(field, v string, limit int) error {
	if len(v) > limit {
		return overLimit(field, len(v), limit, UnitBytes)
	}
	return nil
}

// maxItems refuses a list of more than limit items.
func maxItems(field string, n, limit int) error {
	if n > limit {
		return overLimit(field, n, limit, UnitItems)
	}
	return nil
}

// bound is one string and its limit, for bounds.
type bound struct {
	field string
	v     string
	limit int
}

// bounds checks each string against its limit, in order.
func bounds(bs ...bound) error {
	for _, b := range bs {
		if err := maxLen(b.field, b.v, b.limit); err != nil {
			return err
		}
	}
	return nil
}

// eachMaxLen checks a list's length and each item's.
func eachMaxLen(field string, vs []string, items, limit int) error {
	if err := maxItems(field, len(vs), items); err != nil {
		return err
	}
	for i, v := range vs {
		if err := maxLen(fmt.Sprintf("%s[%d]", field, i), v, limit); err != nil {
			return err
		}
	}
	return nil
}

// headerBounds checks the envelope every command shares.
func headerBounds(h Header) error {
	return bounds(bound{"id", h.ID, MaxIDLen}, bound{"agent_id", h.AgentID, MaxIDLen})
}

// imageBounds checks a prompt's or steer's images: how many, and each
// whole (checkImage).
func imageBounds(images []Image) error {
	if err := maxItems("images", len(images), MaxImages); err != nil {
		return err
	}
	for i, im := range images {
		if err := checkImage(fmt.Sprintf("images[%d]", i), im); err != nil {
			return err
		}
	}
	return nil
}

// ---- per-command bounds, called first by each Validate ----

func (c *Prompt) bounds() error {
	if err := bounds(bound{"message", c.Message, MaxTextLen}, bound{"dedupe_key", c.DedupeKey, MaxIDLen}); err != nil {
		return err
	}
	return imageBounds(c.Images)
}

func (c *Steer) bounds() error {
	if err := maxLen("message", c.Message, MaxTextLen); err != nil {
		return err
	}
	return imageBounds(c.Images)
}

func (c *PermissionResponse) bounds() error {
	return bounds(bound{"request_id", c.RequestID, MaxIDLen}, bound{"choice_id", c.ChoiceID, MaxIDLen},
		bound{"reason", c.Reason, MaxReasonLen}, bound{"source", c.Source, MaxIDLen})
}

func (c *UIResponse) bounds() error {
	return bounds(bound{"request_id", c.RequestID, MaxIDLen}, bound{"value", string(c.Value), MaxTextLen},
		bound{"source", c.Source, MaxIDLen})
}

func (c *SessionOp) bounds() error {
	if c.Args == nil {
		return nil
	}
	return maxLen("args.from_entry_id", c.Args.FromEntryID, MaxIDLen)
}

func (c *AgentCreate) bounds() error {
	if err := bounds(
		bound{"cwd", c.Cwd, MaxPathLen}, bound{"session_id", c.SessionID, MaxIDLen},
		bound{"model", c.Model, MaxNameLen}, bound{"provider", c.Provider, MaxNameLen},
		bound{"mode", c.Mode, MaxNameLen}, bound{"name", c.Name, MaxNameLen},
		bound{"parent_agent_id", c.ParentAgentID, MaxIDLen},
	); err != nil {
		return err
	}
	if err := eachMaxLen("tools", c.Tools, MaxListLen, MaxNameLen); err != nil {
		return err
	}
	return eachMaxLen("skills", c.Skills, MaxListLen, MaxNameLen)
}

func (c *SubagentCreate) bounds() error {
	if err := bounds(
		bound{"parent_agent_id", c.ParentAgentID, MaxIDLen}, bound{"name", c.Name, MaxNameLen},
		bound{"task", c.Task, MaxTextLen}, bound{"model", c.Model, MaxNameLen},
		bound{"provider", c.Provider, MaxNameLen}, bound{"mode", c.Mode, MaxNameLen},
		bound{"request_id", c.RequestID, MaxIDLen},
	); err != nil {
		return err
	}
	if err := maxItems("tasks", len(c.Tasks), MaxTasks); err != nil {
		return err
	}
	if err := eachMaxLen("tools", c.Tools, MaxListLen, MaxNameLen); err != nil {
		return err
	}
	if err := eachMaxLen("skills", c.Skills, MaxListLen, MaxNameLen); err != nil {
		return err
	}
	for i, t := range c.Tasks {
		if err := bounds(
			bound{fmt.Sprintf("tasks[%d].name", i), t.Name, MaxNameLen},
			bound{fmt.Sprintf("tasks[%d].task", i), t.Task, MaxTextLen},
		); err != nil {
			return err
		}
	}
	return nil
}

func (c *SubagentWait) bounds() error {
	if err := maxLen("parent_agent_id", c.ParentAgentID, MaxIDLen); err != nil {
		return err
	}
	return eachMaxLen("handles", c.Handles, MaxHandles, MaxIDLen)
}

func (c *SubagentStatus) bounds() error {
	if err := maxLen("parent_agent_id", c.ParentAgentID, MaxIDLen); err != nil {
		return err
	}
	return eachMaxLen("targets", c.Targets, MaxHandles, MaxIDLen)
}

func (c *WorkspaceCreate) bounds() error {
	return bounds(
		bound{"cwd", c.Cwd, MaxPathLen}, bound{"label", c.Label, MaxLabelLen},
		bound{"branch", c.Branch, MaxRefLen}, bound{"base_ref", c.BaseRef, MaxRefLen},
		bound{"integration_target", c.IntegrationTarget, MaxRefLen}, bound{"title", c.Title, MaxLabelLen},
		bound{"name", c.Name, MaxNameLen}, bound{"model", c.Model, MaxNameLen},
		bound{"provider", c.Provider, MaxNameLen}, bound{"mode", c.Mode, MaxNameLen},
	)
}

func (c *WorkspaceAttach) bounds() error {
	return bounds(
		bound{"workspace_id", c.WorkspaceID, MaxIDLen}, bound{"title", c.Title, MaxLabelLen},
		bound{"name", c.Name, MaxNameLen}, bound{"model", c.Model, MaxNameLen},
		bound{"provider", c.Provider, MaxNameLen}, bound{"mode", c.Mode, MaxNameLen},
	)
}
