package refagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
	"github.com/shard-dev/shard/runtime/tools"
)

// toolAsk is the name of the ask tool: the model asks the person a
// question through a ui_request (docs/protocol.md §9.5).
const toolAsk = "ask"

// Bounds of an ask's arguments: a question is a dialog, not a document.
const (
	maxAskOptions = 64
	maxAskText    = 16 << 10
)

// askSchema is the JSON schema of the ask tool's arguments.
var askSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "kind": {"type": "string", "enum": ["select", "confirm", "input", "editor", "notify"],
      "description": "select: pick from options; confirm: yes or no; input: one line of text; editor: longer text; notify: tell the person something, no answer."},
    "title": {"type": "string", "description": "The question (or, for notify, the notice) in one line."},
    "message": {"type": "string", "description": "More detail under the title."},
    "options": {"type": "array", "items": {"type": "string"}, "description": "select: the options to choose from."},
    "multiple": {"type": "boolean", "description": "select: the person may pick several options; the answer is then a list."},
    "placeholder": {"type": "string", "description": "input, editor: a hint shown in the empty field."},
    "prefill": {"type": "string", "description": "input, editor: the text the field starts with."},
    "notify_type": {"type": "string", "enum": ["info", "warning", "error"], "description": "notify: how serious the notice is. Default info."}
  },
  "required": ["kind", "title"],
  "additionalProperties": false
}`)

const askDescription = "Ask the person you work for a question and wait for the answer, or notify them of something. " +
	"Use it when you need a decision or information only they have; do not ask what you can find out yourself. " +
	`The result is JSON: {"answer": …} with the option picked (a list when multiple), true or false for confirm, ` +
	`the text for input and editor, or null when the person dismissed the question or nobody could answer.`

// askTool is the ask tool. It is read-only (asking changes nothing, so it
// runs in plan mode and without a permission request) and runs inside the
// turn: its answer comes through the turn's pending requests (askRun).
func askTool() tool {
	return tool{
		name:     toolAsk,
		readOnly: true,
		spec:     provider.ToolSpec{Name: toolAsk, Description: askDescription, Schema: askSchema},
		check:    func(args map[string]any) error { _, err := askRequest(args); return err },
		inTurn:   (*turnState).askRun,
	}
}

// askRequest builds the ui_request an ask's arguments describe (without its
// request id) or says what is wrong with them.
func askRequest(args map[string]any) (protocol.UIRequest, error) {
	req := protocol.UIRequest{Header: protocol.Header{Type: protocol.TypeUIRequest}}
	str := func(key string) (string, error) {
		v, ok := args[key]
		if !ok || v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s must be a string", key)
		}
		if len(s) > maxAskText {
			return "", fmt.Errorf("%s is longer than %d bytes", key, maxAskText)
		}
		return s, nil
	}
	var err error
	for key, dst := range map[string]*string{"kind": &req.Kind, "title": &req.Title, "message": &req.Message,
		"placeholder": &req.Placeholder, "prefill": &req.Prefill, "notify_type": &req.NotifyType} {
		if *dst, err = str(key); err != nil {
			return req, err
		}
	}
	switch req.Kind {
	case protocol.UISelect, protocol.UIConfirm, protocol.UIInput, protocol.UIEditor, protocol.UINotify:
	default:
		return req, errors.New("kind must be one of select, confirm, input, editor, notify")
	}
	if strings.TrimSpace(req.Title) == "" {
		return req, errors.New("title is required")
	}
	if req.NotifyType != "" && !slices.Contains([]string{"info", "warning", "error"}, req.NotifyType) {
		return req, errors.New("notify_type must be info, warning or error")
	}
	if v, ok := args["multiple"]; ok && v != nil {
		b, ok := v.(bool)
		if !ok {
			return req, errors.New("multiple must be a boolean")
		}
		req.Multiple = b
	}
	if v, ok := args["options"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return req, errors.New("options must be a list of strings")
		}
		for _, o := range list {
			s, ok := o.(string)
			if !ok || s == "" || len(s) > maxAskText {
				return req, errors.New("options must be non-empty strings")
			}
			if !slices.Contains(req.Options, s) {
				req.Options = append(req.Options, s)
			}
		}
	}
	switch {
	case req.Kind == protocol.UISelect && len(req.Options) == 0:
		return req, errors.New("select needs options")
	case len(req.Options) > maxAskOptions:
		return req, fmt.Errorf("at most %d options", maxAskOptions)
	case req.Kind != protocol.UISelect && (len(req.Options) > 0 || req.Multiple):
		return req, errors.New("options and multiple are for select only")
	}
	return req, nil
}

// askRun asks the person (the ask tool's run): a notify is announced, any
// other kind waits for the first answer (docs/protocol.md §6.3). The answer
// is the tool's JSON result; the headless timeout is a TIMEOUT error result.
func (t *turnState) askRun(args map[string]any) toolOutput {
	req, err := askRequest(args)
	if err != nil { // check ran already; kept for safety
		return errorOutput("%v", err)
	}
	r := t.r
	if req.Kind == protocol.UINotify {
		if t.notify(req) != nil {
			return errorOutput("aborted")
		}
		return jsonOutput(map[string]any{"notified": true})
	}
	res, err := t.askUI(req)
	if err != nil {
		return errorOutput("aborted")
	}
	if res.by == byTimeout {
		return errorOutput("TIMEOUT: nobody answered within %s", r.opts.HeadlessTimeout)
	}
	answer, err := askAnswer(req, res.value)
	if err != nil {
		return errorOutput("%v", err)
	}
	out := map[string]any{"answer": answer}
	switch {
	case answer != nil:
	case res.source == sourceHeadless:
		out["note"] = "nobody could answer: no person is attached to this agent"
	default:
		out["note"] = "the person dismissed the question"
	}
	return jsonOutput(out)
}

// notify announces the notify req. Choice (docs/protocol.md §9.5): a
// notify asks nothing, so the turn does not wait: ui_request, then at once
// ui_resolved with value null and source "notify". It returns
// errTurnAborted when the turn ended before.
func (t *turnState) notify(req protocol.UIRequest) error {
	p := &pendingRequest{id: t.r.ids.next("ui"), kind: kindUI, done: make(chan resolution, 1)}
	req.Header = protocol.Header{Type: protocol.TypeUIRequest}
	req.RequestID = p.id
	p.raw = protocol.MustMarshal(req)
	if err := t.open(p, protocol.StatusWaitingForUI); err != nil {
		return err
	}
	t.resolveIfOpen(p, resolution{source: sourceNotify})
	return nil
}

// askUI opens req as a pending ui_request of the turn and waits for its
// resolution; it returns errTurnAborted when the turn ended meanwhile.
func (t *turnState) askUI(req protocol.UIRequest) (resolution, error) {
	p := &pendingRequest{id: t.r.ids.next("ui"), kind: kindUI, done: make(chan resolution, 1)}
	req.Header = protocol.Header{Type: protocol.TypeUIRequest}
	req.RequestID = p.id
	p.raw = protocol.MustMarshal(req)
	if err := t.open(p, protocol.StatusWaitingForUI); err != nil {
		return resolution{}, err
	}
	res := t.await(p)
	if res.by == byAbort {
		return res, errTurnAborted
	}
	return res, nil
}

// askAnswer is what the model is told a ui_response value means for req:
// nil (null: dismissed, or nobody could answer), the option or options
// picked, true or false for confirm, the text for input and editor.
//
// Choice (docs/protocol.md §9.5): a confirm takes "yes"/"no" (the page),
// "true"/"false" (shardctl), "y"/"n", in any case; the wire value is a
// string (a JSON boolean is refused by the decoder, INVALID_REQUEST), and
// the model is told a boolean. A multiple select is answered with a list
// (a single string counts as a one-element list); a single select with a
// string. An answer outside the options is told as given: the person's
// word wins over the offered list.
func askAnswer(req protocol.UIRequest, v json.RawMessage) (any, error) {
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	var s string
	var list []string
	isStr := json.Unmarshal(v, &s) == nil
	isList := !isStr && json.Unmarshal(v, &list) == nil
	switch req.Kind {
	case protocol.UIConfirm:
		var b bool
		if json.Unmarshal(v, &b) == nil {
			return b, nil
		}
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "yes", "y", "true":
			return true, nil
		case "no", "n", "false":
			return false, nil
		}
	case protocol.UISelect:
		if req.Multiple {
			if isStr {
				list = []string{s}
			}
			if isStr || isList {
				if list == nil {
					list = []string{}
				}
				return list, nil
			}
		} else if isStr {
			return s, nil
		} else if isList && len(list) == 1 {
			return list[0], nil
		}
	default:
		if isStr {
			return s, nil
		}
		if isList {
			return strings.Join(list, "\n"), nil
		}
	}
	return nil, fmt.Errorf("the answer %s does not fit a %s question", truncateText(string(v), 200), req.Kind)
}

// jsonOutput is a successful tool result carrying v as JSON.
func jsonOutput(v any) toolOutput {
	return toolOutput{content: protocol.ToolResultContent{Kind: tools.ContentJSON, Value: v}}
}

// truncateText cuts s to at most n bytes (on a rune boundary), marking the
// cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
