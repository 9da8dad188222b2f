package agent

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shard-dev/shard/protocol"
)

// The sim provider (DESIGN §6) is scripted by the user: every line of a user
// message that starts with "sim:" (after leading blanks) is a directive, run
// in order. A provider call runs directives up to and including the first
// tool call; the rest run in the next provider call of the turn.

// simPrefix marks a directive line.
const simPrefix = "sim:"

// Limits of the sim provider.
const (
	// maxFloodBytes bounds n*bytes of one `sim: flood`: the streamed text is
	// also kept whole in message_complete and the live window.
	maxFloodBytes = 64 << 20
	// textPieces is how many deltas a `say`/`think`/reply is split into at
	// most.
	textPieces = 4
	// afterToolsReply is said by a provider call that follows tool calls
	// when no directives are left.
	afterToolsReply = "Done."
)

// directiveKind says what a directive does.
type directiveKind int

// Directive kinds.
const (
	dirInvalid  directiveKind = iota // unknown or malformed: the call fails with PROVIDER_ERROR
	dirEcho                          // a message without directives: reply quoting it
	dirSay                           // sim: say <text>
	dirThink                         // sim: think <text>
	dirTool                          // sim: tool <name> <json-args>
	dirAsk                           // sim: ask <select|confirm|input> <title> [options…]
	dirSleep                         // sim: sleep <ms>
	dirFlood                         // sim: flood <n> <bytes>
	dirFail                          // sim: fail <message>
	dirHang                          // sim: hang
	dirExit                          // sim: exit <code>
	dirSubagent                      // sim: subagent <name> <task…>
)

// directive is one parsed sim instruction. Fields are meaningful per kind.
type directive struct {
	kind directiveKind
	// text: say, think, echo (the reply), fail (the message), invalid (why).
	text string
	// tool and subagent calls.
	tool    string
	args    map[string]any
	rawArgs string // compact JSON of args, streamed as args_delta fragments
	// ask.
	askKind string
	title   string
	options []string
	// sleep.
	dur time.Duration
	// flood.
	n, size int
	// exit.
	code int
}

// endsCall reports whether the directive ends the provider call (the model
// called a tool).
func (d directive) endsCall() bool { return d.kind == dirTool || d.kind == dirSubagent }

// parseDirectives returns the directives of a user message, or, when it has
// none, a single echo directive quoting it.
func parseDirectives(msg string) []directive {
	var out []directive
	for line := range strings.SplitSeq(msg, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, simPrefix); ok {
			out = append(out, parseDirective(strings.TrimSpace(rest)))
		}
	}
	if len(out) == 0 {
		out = []directive{{kind: dirEcho, text: "You said: " + msg}}
	}
	return out
}

// parseDirective parses the text after "sim:". It never fails: a malformed
// directive becomes dirInvalid, which fails the provider call that reaches
// it, so errors surface in order like any other model failure.
func parseDirective(s string) directive {
	verb, rest, _ := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	d, err := parseVerb(verb, rest)
	if err != nil {
		return directive{kind: dirInvalid, text: fmt.Sprintf("sim: %s: %v", cmp.Or(verb, "(empty)"), err)}
	}
	return d
}

func parseVerb(verb, rest string) (directive, error) {
	switch verb {
	case "say", "think":
		if rest == "" {
			return directive{}, errors.New("text required")
		}
		k := dirSay
		if verb == "think" {
			k = dirThink
		}
		return directive{kind: k, text: rest}, nil
	case "tool":
		name, raw, _ := strings.Cut(rest, " ")
		if name == "" {
			return directive{}, errors.New("tool name required")
		}
		args, compact, err := parseArgs(raw)
		if err != nil {
			return directive{}, err
		}
		return directive{kind: dirTool, tool: name, args: args, rawArgs: compact}, nil
	case "ask":
		toks, err := splitArgs(rest)
		if err != nil {
			return directive{}, err
		}
		if len(toks) < 2 {
			return directive{}, errors.New("want ask <select|confirm|input> <title> [options…]")
		}
		switch toks[0] {
		case protocol.UISelect, protocol.UIConfirm, protocol.UIInput:
		default:
			return directive{}, fmt.Errorf("unknown ask kind %q (want select, confirm or input)", toks[0])
		}
		return directive{kind: dirAsk, askKind: toks[0], title: toks[1], options: toks[2:]}, nil
	case "sleep":
		ms, err := strconv.Atoi(rest)
		if err != nil || ms < 0 {
			return directive{}, errors.New("want sleep <non-negative milliseconds>")
		}
		return directive{kind: dirSleep, dur: time.Duration(ms) * time.Millisecond}, nil
	case "flood":
		f := strings.Fields(rest)
		if len(f) != 2 {
			return directive{}, errors.New("want flood <n> <bytes>")
		}
		n, err1 := strconv.Atoi(f[0])
		size, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil || n < 0 || size < 1 {
			return directive{}, errors.New("want flood <n ≥ 0> <bytes ≥ 1>")
		}
		if int64(n)*int64(size) > maxFloodBytes {
			return directive{}, fmt.Errorf("n*bytes exceeds %d", maxFloodBytes)
		}
		return directive{kind: dirFlood, n: n, size: size}, nil
	case "fail":
		return directive{kind: dirFail, text: cmp.Or(rest, "sim provider failure")}, nil
	case "hang":
		return directive{kind: dirHang}, nil
	case "exit":
		code, err := strconv.Atoi(rest)
		if err != nil {
			return directive{}, errors.New("want exit <code>")
		}
		return directive{kind: dirExit, code: code}, nil
	case "subagent":
		name, task, _ := strings.Cut(rest, " ")
		if name == "" {
			return directive{}, errors.New("want subagent <name> <task…>")
		}
		args := map[string]any{"action": subagentCreate, "name": name, "task": strings.TrimSpace(task)}
		return directive{kind: dirSubagent, tool: toolSubagent, args: args, rawArgs: string(protocol.MustMarshal(args))}, nil
	}
	return directive{}, errors.New("unknown directive")
}

// parseArgs decodes the JSON-object arguments of a tool directive (empty
// means {}). Numbers keep their text (json.Number), so the canonical form
// used by allow_always is exact.
func parseArgs(raw string) (map[string]any, string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		raw = "{}"
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil || args == nil {
		return nil, "", errors.New("tool arguments must be a JSON object")
	}
	if dec.More() {
		return nil, "", errors.New("trailing data after tool arguments")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(raw)); err != nil {
		return nil, "", fmt.Errorf("compact tool arguments: %w", err)
	}
	return args, buf.String(), nil
}

// splitArgs splits s on blanks; a token that starts with a double quote runs
// to its closing quote and is unquoted with Go rules (so \" and \\ work).
func splitArgs(s string) ([]string, error) {
	var out []string
	for s = strings.TrimLeft(s, " \t"); s != ""; s = strings.TrimLeft(s, " \t") {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, errors.New("unterminated quoted string")
			}
			v, err := strconv.Unquote(q)
			if err != nil {
				return nil, fmt.Errorf("bad quoted string: %w", err)
			}
			out = append(out, v)
			s = s[len(q):]
			continue
		}
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			i = len(s)
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out, nil
}

// pieces splits s into at most n non-empty parts of about equal length, cut
// at rune boundaries (each delta stays valid UTF-8). A short s gives fewer
// parts; an empty s gives none.
func pieces(s string, n int) []string {
	runes := utf8.RuneCountInString(s)
	if runes == 0 {
		return nil
	}
	n = min(n, runes)
	per := (runes + n - 1) / n
	out := make([]string, 0, n)
	for s != "" {
		i, count := 0, 0
		for i < len(s) && count < per {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// tokens counts sim tokens: bytes/4, at least 1 for non-empty input.
func tokens(n int) int64 {
	if n <= 0 {
		return 0
	}
	return int64(max(1, n/4))
}

// contentBytes is the size the sim provider charges for message content.
func contentBytes(blocks []protocol.ContentBlock) int {
	n := 0
	for _, b := range blocks {
		n += len(b.Text)
		if b.Args != nil {
			n += len(protocol.MustMarshal(b.Args))
		}
		if c := b.Content; c != nil {
			n += len(c.Text) + len(c.Message)
			if c.Value != nil {
				n += len(protocol.MustMarshal(c.Value))
			}
		}
	}
	return n
}
