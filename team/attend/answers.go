package attend

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// A permission option's meaning: the choice id the reference runtime
// gives it, the intent any runtime's choices carry (docs/protocol.md §9.5),
// and the legacy decision.
type permissionMeaning struct {
	choiceID, intent, decision string
}

// permissionMeanings maps the option labels (and, as aliases, the legacy
// decisions) to their meaning.
var permissionMeanings = map[string]permissionMeaning{
	protocol.OptionAllowOnce:     {protocol.DecisionAllow, "allow", protocol.DecisionAllow},
	protocol.OptionAlwaysAllow:   {protocol.DecisionAllowAlways, "persist", protocol.DecisionAllowAlways},
	protocol.OptionDeny:          {protocol.DecisionDeny, "deny", protocol.DecisionDeny},
	protocol.DecisionAllow:       {protocol.DecisionAllow, "allow", protocol.DecisionAllow},
	protocol.DecisionAllowAlways: {protocol.DecisionAllowAlways, "persist", protocol.DecisionAllowAlways},
	protocol.DecisionDeny:        {protocol.DecisionDeny, "deny", protocol.DecisionDeny},
}

// Sources of a resolution that no client's answer made (the runtime's and
// the daemon's own, docs/protocol.md §6.3, §9.5).
var nonClientSources = map[string]bool{
	"headless": true, "timeout": true, "abort": true, "runtime_exit": true, "notify": true,
	"node_lost": true, // the child's node was lost (docs/protocol.md §13 "Runs on other nodes")
}

// permissionAnswer is the permission_response an option makes for m:
// exactly one of choiceID (when m offers choices: the choice of the
// option's id, else the first of its intent) or decision (a legacy
// decision m's options allow). option is an option label
// (protocol.OptionAllowOnce, OptionAlwaysAllow, OptionDeny), a legacy
// decision, or the id of one of m's choices (a runtime's own, e.g.
// "allow_signature"). Anything else, or an option m does not offer, is
// INVALID_REQUEST.
func permissionAnswer(m *protocol.PermissionRequest, option string) (choiceID, decision string, err error) {
	meaning, known := permissionMeanings[option]
	if len(m.Choices) > 0 {
		if i := slices.IndexFunc(m.Choices, func(c protocol.PermissionChoice) bool { return c.ID == option }); i >= 0 {
			return option, "", nil
		}
		if known {
			if i := slices.IndexFunc(m.Choices, func(c protocol.PermissionChoice) bool { return c.ID == meaning.choiceID }); i >= 0 {
				return meaning.choiceID, "", nil
			}
			if i := slices.IndexFunc(m.Choices, func(c protocol.PermissionChoice) bool { return c.Intent == meaning.intent }); i >= 0 {
				return m.Choices[i].ID, "", nil
			}
		}
		return "", "", invalid("option %q is not offered by permission request %s", option, m.RequestID)
	}
	if !known || (len(m.Options) > 0 && !slices.Contains(m.Options, meaning.decision)) {
		return "", "", invalid("option %q is not offered by permission request %s", option, m.RequestID)
	}
	return "", meaning.decision, nil
}

// questionValue checks value as the answer to the question r and returns
// it normalized (a string, a []string, or nil): a select's option (a list
// of them for a multiple select; one string is a list of one), a confirm's
// "yes" or "no" ("y", "true", … and a bool are taken), an input's or
// editor's text; nil dismisses any question.
func questionValue(r Request, value any) (any, error) {
	if value == nil {
		return nil, nil
	}
	switch r.UIKind {
	case protocol.UISelect:
		var picked []string
		switch v := value.(type) {
		case string:
			picked = []string{v}
		case []string:
			picked = v
			if picked == nil {
				picked = []string{} // none picked, not null (a dismissal)
			}
		default:
			return nil, invalid("answer to select %s: want a string or a list of strings, got %T", r.RequestID, value)
		}
		for _, p := range picked {
			if !slices.Contains(r.Options, p) {
				return nil, invalid("answer to select %s: %q is not one of its options", r.RequestID, p)
			}
		}
		if r.Multiple {
			return slices.Clone(picked), nil
		}
		if len(picked) != 1 {
			return nil, invalid("answer to select %s: want one option, got %d", r.RequestID, len(picked))
		}
		return picked[0], nil
	case protocol.UIConfirm:
		switch v := value.(type) {
		case bool:
			return map[bool]string{true: "yes", false: "no"}[v], nil
		case string:
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "yes", "y", "true":
				return "yes", nil
			case "no", "n", "false":
				return "no", nil
			}
		}
		return nil, invalid("answer to confirm %s: want yes or no", r.RequestID)
	default: // input, editor, and kinds this build does not know: text
		if s, ok := value.(string); ok {
			return s, nil
		}
		return nil, invalid("answer to %s %s: want a string, got %T", r.UIKind, r.RequestID, value)
	}
}

// resolvedPermission is the Resolved of r by m.
func resolvedPermission(r Request, m *protocol.PermissionResolved) Resolved {
	res := Resolved{AgentID: r.AgentID, RequestID: r.RequestID, Kind: KindPermission,
		Decision: m.Decision, ChoiceID: m.ChoiceID, Source: m.Source}
	intent := ""
	if m.ChoiceID != "" {
		if i := slices.IndexFunc(r.Choices, func(c protocol.PermissionChoice) bool { return c.ID == m.ChoiceID }); i >= 0 {
			intent = r.Choices[i].Intent
		}
	} else if meaning, ok := permissionMeanings[m.Decision]; ok {
		intent = meaning.intent
	}
	res.Option = map[string]string{"allow": protocol.OptionAllowOnce, "persist": protocol.OptionAlwaysAllow, "deny": protocol.OptionDeny}[intent]
	return res
}

// resolvedQuestion is the Resolved of r by m.
func resolvedQuestion(r Request, m *protocol.UIResolved) Resolved {
	res := Resolved{AgentID: r.AgentID, RequestID: r.RequestID, Kind: KindQuestion, Source: m.Source}
	res.Value = decodeValue(m.Value)
	if s, ok := res.Value.(string); ok {
		res.Option = s
	}
	return res
}

// decodeValue reads a ui value: a string, a []string, or nil (null,
// absent, or a shape the protocol does not have).
func decodeValue(raw json.RawMessage) any {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil // null would decode as "" and nil as a list
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil && list != nil {
		return list
	}
	return nil
}

// sentAnswer is what this Watcher answered a request with: a
// permission's choiceID or decision, or a question's normalized value.
type sentAnswer struct {
	choiceID, decision string
	value              any
	// by is whom the answer was sent for ("": the Watcher's own user).
	by string
}

// mine reports whether res is the resolution sent made.
func mine(sent *sentAnswer, res Resolved) bool {
	if sent == nil || nonClientSources[res.Source] {
		return false
	}
	if res.Kind == KindPermission {
		if sent.choiceID != "" {
			return res.ChoiceID == sent.choiceID
		}
		return res.ChoiceID == "" && res.Decision == sent.decision
	}
	return reflect.DeepEqual(sent.value, res.Value)
}
