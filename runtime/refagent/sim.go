package refagent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// The sim provider (docs/sim.md) is the offline, deterministic model that
// lets demos, tests and benchmarks drive every path of the protocol
// without a network. It is scripted by the user: every line of a user
// message that starts with "sim:" (after leading blanks) is a directive, run
// in order. A provider call runs directives up to and including the first
// tool call; the rest run in the next provider call of the turn. The sim is
// a provider.Provider like the real ones (simTurn below): the turn loop
// streams its events, runs its tool calls through the gate and sends the
// results back the same way. Its runtime-level directives (ask, hang,
// exit) call back into the turn through simHost.
//
// One user message is not a script: the daemon's goal prompt to a team's
// lead, which the sim plans with the team tool instead (simlead.go).

// simPrefix marks a directive line.
const simPrefix = "sim:"

// Limits of the sim provider.
const (
	// maxFloodBytes bounds n*bytes of one `sim: flood`: the streamed text is
	// also kept whole in message_complete and the live window.
	maxFloodBytes = 64 << 20
	// stampWidth is the width of a flood delta's stamp: the emission time
	// in UnixNano, zero-padded to 19 digits (enough until 2262), then a
	// blank.
	stampWidth = 20
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
	dirInvalid    directiveKind = iota // unknown or malformed: the call fails with PROVIDER_ERROR
	dirEcho                            // a message without directives: reply quoting it
	dirSay                             // sim: say <text>
	dirThink                           // sim: think <text>
	dirTool                            // sim: tool <name> <json-args>
	dirAsk                             // sim: ask <select|multi|confirm|input|editor|notify> <title> [options or words…] [key=value…]
	dirSleep                           // sim: sleep <ms>
	dirFlood                           // sim: flood <n> <bytes> [stamp] [rate <events/s>]
	dirFail                            // sim: fail <message>
	dirHang                            // sim: hang
	dirExit                            // sim: exit <code>
	dirSubagent                        // sim: subagent <name> <task…>
	dirTeamPlan                        // the sim lead's team create_tasks call (simlead.go)
	dirTeamReport                      // the sim lead's line about that call's result
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
	// ask: the ui_request to open, built as the ask tool builds it
	// (askRequest), without its header and id.
	ui protocol.UIRequest
	// sleep.
	dur time.Duration
	// flood: n deltas of size bytes; stamp starts each with its emission
	// time (stampWidth bytes); rate > 0 paces them at rate deltas/s.
	n, size int
	stamp   bool
	rate    int
	// exit.
	code int
}

// endsCall reports whether the directive ends the provider call (the model
// called a tool).
func (d directive) endsCall() bool {
	return d.kind == dirTool || d.kind == dirSubagent || d.kind == dirTeamPlan
}

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
		return parseAsk(rest)
	case "sleep":
		ms, err := strconv.Atoi(rest)
		if err != nil || ms < 0 {
			return directive{}, errors.New("want sleep <non-negative milliseconds>")
		}
		return directive{kind: dirSleep, dur: time.Duration(ms) * time.Millisecond}, nil
	case "flood":
		return parseFlood(rest)
	case "fail":
		return directive{kind: dirFail, text: cmp.Or(rest, "sim provider failure")}, nil
	case "hang":
		// `sim: hang` ignores abort and SIGTERM; `sim: hang abort` ignores
		// only abort (and input), so SIGTERM still ends the process — the
		// middle row of the stop-escalation matrix.
		if rest != "" && rest != "abort" {
			return directive{}, errors.New("want hang or hang abort")
		}
		return directive{kind: dirHang, text: rest}, nil
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

// askMulti is the sim's name for a multi-select: a select with multiple.
const askMulti = "multi"

// askKeys maps the key=value settings of `sim: ask` to the ask tool's
// arguments they set.
var askKeys = map[string]string{"message": "message", "placeholder": "placeholder", "prefill": "prefill", "type": "notify_type"}

// parseAsk parses the arguments of `sim: ask <kind> <title> [options or
// words…] [key=value…]`, reaching every ui_request kind the ask tool
// reaches (docs/protocol.md §9.5): select and multi (a select with
// multiple) take their options after the title; the other kinds join
// further words to the title. message=, placeholder=, prefill= and type=
// (a notify's info, warning or error) set those fields. The request is
// validated as the ask tool's arguments are (askRequest).
func parseAsk(rest string) (directive, error) {
	const usage = "want ask <select|multi|confirm|input|editor|notify> <title> [options or words…] [message=… placeholder=… prefill=… type=…]"
	toks, err := splitArgs(rest)
	if err != nil {
		return directive{}, err
	}
	if len(toks) < 2 {
		return directive{}, errors.New(usage)
	}
	kind := toks[0]
	args := map[string]any{"kind": kind, "title": toks[1]}
	switch kind {
	case askMulti:
		args["kind"], args["multiple"] = protocol.UISelect, true
	case protocol.UISelect, protocol.UIConfirm, protocol.UIInput, protocol.UIEditor, protocol.UINotify:
	default:
		return directive{}, fmt.Errorf("unknown ask kind %q (want select, multi, confirm, input, editor or notify)", kind)
	}
	var words []any
	for _, tok := range toks[2:] {
		if k, v, ok := strings.Cut(tok, "="); ok && askKeys[k] != "" {
			args[askKeys[k]] = v
			continue
		}
		words = append(words, tok)
	}
	if args["kind"] == protocol.UISelect {
		args["options"] = words
	} else if len(words) > 0 {
		title := []string{toks[1]}
		for _, w := range words {
			title = append(title, w.(string))
		}
		args["title"] = strings.Join(title, " ")
	}
	req, err := askRequest(args)
	if err != nil {
		return directive{}, err
	}
	req.Header = protocol.Header{}
	return directive{kind: dirAsk, ui: req}, nil
}

// parseFlood parses the arguments of `sim: flood <n> <bytes> [stamp] [rate
// <events/s>]` (options in any order, each at most once).
//
// stamp begins every delta with the wall-clock time at which the sim
// produced it, right before the runtime writes it to stdout: UnixNano in 19
// zero-padded digits and a blank, then the usual filler up to <bytes>
// (which must be ≥ 20). A reader on the same machine subtracts it from its
// receive time to get the latency added on the way.
//
// rate paces the flood open-loop: delta i is due i/rate seconds after the
// first, whatever happened to the ones before, so a stall is followed by a
// burst that catches up (what a fast model would do after a network
// hiccup) and never lowers the offered rate. Without rate the flood is as
// fast as stdout takes it.
func parseFlood(rest string) (directive, error) {
	const usage = "want flood <n ≥ 0> <bytes ≥ 1> [stamp] [rate <events/s ≥ 1>]"
	f := strings.Fields(rest)
	if len(f) < 2 {
		return directive{}, errors.New(usage)
	}
	n, err1 := strconv.Atoi(f[0])
	size, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || n < 0 || size < 1 {
		return directive{}, errors.New(usage)
	}
	d := directive{kind: dirFlood, n: n, size: size}
	for opts := f[2:]; len(opts) > 0; {
		switch {
		case opts[0] == "stamp" && !d.stamp:
			d.stamp = true
			opts = opts[1:]
		case opts[0] == "rate" && d.rate == 0 && len(opts) > 1:
			r, err := strconv.Atoi(opts[1])
			if err != nil || r < 1 {
				return directive{}, errors.New(usage)
			}
			d.rate = r
			opts = opts[2:]
		default:
			return directive{}, errors.New(usage)
		}
	}
	if d.stamp && size < stampWidth {
		return directive{}, fmt.Errorf("flood stamp needs bytes ≥ %d", stampWidth)
	}
	if int64(n)*int64(size) > maxFloodBytes {
		return directive{}, fmt.Errorf("n*bytes exceeds %d", maxFloodBytes)
	}
	return d, nil
}

// floodDue is when delta i of a flood paced at rate deltas/s is due,
// counted from the first.
func floodDue(i, rate int) time.Duration {
	return time.Duration(int64(i) * int64(time.Second) / int64(rate))
}

// stampDelta writes now (UnixNano) into the first stampWidth bytes of buf as
// 19 zero-padded digits and a blank.
func stampDelta(buf []byte, now time.Time) {
	v := now.UnixNano()
	for i := stampWidth - 2; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	buf[stampWidth-1] = ' '
}

// ParseFloodStamp returns the emission time a stamped flood delta begins
// with (see parseFlood); ok is false when text carries no stamp.
func ParseFloodStamp(text string) (unixNano int64, ok bool) {
	if len(text) < stampWidth || text[stampWidth-1] != ' ' {
		return 0, false
	}
	for i := range stampWidth - 1 {
		c := text[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		unixNano = unixNano*10 + int64(c-'0')
	}
	return unixNano, true
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
// to its closing quote and is unquoted with Go rules (so \" and \\ work),
// and so does the value of a key="value" token (giving key=value).
func splitArgs(s string) ([]string, error) {
	var out []string
	for s = strings.TrimLeft(s, " \t"); s != ""; s = strings.TrimLeft(s, " \t") {
		key := ""
		if m := quotedKey.FindString(s); m != "" {
			key, s = m[:len(m)-1], s[len(m)-1:]
		}
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, errors.New("unterminated quoted string")
			}
			v, err := strconv.Unquote(q)
			if err != nil {
				return nil, fmt.Errorf("bad quoted string: %w", err)
			}
			out = append(out, key+v)
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

// quotedKey matches the start of a key="value" token up to its quote.
var quotedKey = regexp.MustCompile(`^[a-z_]+="`)

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

// imageTokens is what one image counts in the context estimate: about what
// the Anthropic API charges for a large image (width × height / 750, at most
// some 1600 tokens once scaled down to its limit).
const imageTokens = 1600

// contentBytes is the size the sim provider charges for message content
// (and the context estimate counts).
func contentBytes(blocks []protocol.ContentBlock) int {
	n := 0
	for _, b := range blocks {
		if b.Type == protocol.BlockImage {
			n += 4 * imageTokens
		}
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

// ---- the sim as a provider ----

// Sim models. sim-think offers reasoning levels; at any level but off each
// of its provider calls starts with a short thinking block naming the
// level, so that a level change is visible.
const (
	simModel      = "sim"
	simThinkModel = "sim-think"
)

// simCatalog is the sim provider's model catalog.
func simCatalog(window int) []protocol.ModelDescriptor {
	return []protocol.ModelDescriptor{
		{ID: providerSim + "/" + simModel, Provider: providerSim, Model: simModel, ContextWindow: window},
		{ID: providerSim + "/" + simThinkModel, Provider: providerSim, Model: simThinkModel, ContextWindow: window},
	}
}

// simLevels is the reasoning catalog of a sim model.
func simLevels(model string) []provider.Level {
	if model != simThinkModel {
		return nil
	}
	return []provider.Level{
		{ID: levelOff, Label: "Off", Description: "No thinking (the default)."},
		{ID: "low", Label: "Low", Description: "A short thinking block before each answer."},
		{ID: "high", Label: "High", Description: "The same thinking block, with more conviction."},
	}
}

// simHost is what the sim needs from its turn for its runtime-level
// directives, which no real model has: they act on the runtime itself.
// Each is called from the turn goroutine, inside Stream.Next.
type simHost interface {
	// simAsk opens a ui_request for d in the turn, waits for its answer and
	// returns what the model says about it. It returns errTurnAborted when
	// the turn was aborted meanwhile.
	simAsk(d directive) (string, error)
	// simHang makes the runtime unresponsive until Run's context is done,
	// then returns errHung.
	simHang(onlyAbort bool) error
	// simExit exits the process (Options.Exit).
	simExit(code int)
}

// The sim is a provider like the real ones, and its turn its host.
var (
	_ provider.Provider = (*simTurn)(nil)
	_ provider.Stream   = (*simStream)(nil)
	_ simHost           = (*turnState)(nil)
)

// simTurn is the sim provider (a provider.Provider) of one turn. Its user
// writes the script: the directives of the turn's prompt and of the steers
// delivered during the turn. simTurn keeps the directives not played yet
// from one provider call to the next of the turn, and knows which messages
// of the conversation it has read by their ids. Each provider call plays
// directives up to and including the first tool call; a call after tool
// results with nothing left to play says afterToolsReply.
//
// A simTurn is used by its turn's goroutine only.
type simTurn struct {
	host     simHost
	promptID string // id of the turn's prompt in the conversation
	ids      *idGen
	window   int // context window in tokens

	seen  map[string]bool // ids of the messages read; nil before the first call
	queue []directive     // script not played yet
	// teamCall is the tool call id of the sim lead's last create_tasks
	// call, whose result its dirTeamReport reads.
	teamCall string
}

func newSimTurn(host simHost, promptID string, ids *idGen, window int) *simTurn {
	return &simTurn{host: host, promptID: promptID, ids: ids, window: window}
}

// Name implements provider.Provider.
func (s *simTurn) Name() string { return providerSim }

// Models implements provider.Provider.
func (s *simTurn) Models() []protocol.ModelDescriptor { return simCatalog(s.window) }

// ReasoningLevels implements provider.Provider.
func (s *simTurn) ReasoningLevels(model string) []provider.Level { return simLevels(model) }

// Stream implements provider.Provider. It fails with PROVIDER_ERROR when
// the conversation exceeds the context window.
func (s *simTurn) Stream(ctx context.Context, req provider.Request) (provider.Stream, error) {
	s.read(req.Messages)
	input := tokens(windowBytes(req.Messages))
	if input > int64(s.window) {
		return nil, protocol.Errorf(protocol.CodeProviderError, "context window exceeded: %d tokens > %d", input, s.window)
	}
	call := s.queue
	if i := slices.IndexFunc(s.queue, directive.endsCall); i >= 0 {
		call = s.queue[:i+1]
	}
	s.queue = s.queue[len(call):]
	if len(call) == 0 { // tool results came back and the script is done
		call = []directive{{kind: dirSay, text: afterToolsReply}}
	}
	for i, d := range call {
		if d.kind == dirTeamReport {
			call[i] = directive{kind: dirSay, text: teamReport(req.Messages, s.teamCall)}
		}
	}
	if level := req.Reasoning; simLevels(req.Model) != nil && level != "" && level != levelOff {
		call = append([]directive{{kind: dirThink, text: "Thinking with " + level + " effort."}}, call...)
	}
	return &simStream{
		ctx:   ctx,
		sim:   s,
		model: cmp.Or(req.Model, simModel),
		input: input,
		call:  slices.Clone(call),
		done:  make(chan struct{}),
	}, nil
}

// read adds the script of the user messages it has not read yet: on the
// first call the turn's prompt and any steer after it, in order; later,
// steers, whose directives run before what is left of the script. Messages
// are told apart by id, so a compaction mid-turn (which replaces read
// messages with a summary) loses nothing; a summary is never a script.
func (s *simTurn) read(msgs []protocol.Message) {
	start := 0
	if s.seen == nil {
		s.seen = make(map[string]bool)
		start = max(0, len(msgs)-1)
		if i := slices.IndexFunc(msgs, func(m protocol.Message) bool { return m.ID == s.promptID }); i >= 0 {
			start = i
		}
		for _, m := range msgs[:start] { // earlier turns
			s.seen[m.ID] = true
		}
	}
	var front []directive
	for _, m := range msgs[start:] {
		if s.seen[m.ID] {
			continue
		}
		s.seen[m.ID] = true
		text := userText(m)
		switch {
		case text == "" || isSummaryID(m.ID):
		case isGoalPrompt(text):
			// A team goal is the sim lead's plan, never its script: no
			// line of it (item, continuation or prose) runs as a
			// directive of the lead.
			front = append(front, leadDirectives(text)...)
		default:
			front = append(front, parseDirectives(text)...)
		}
	}
	s.queue = append(front, s.queue...)
}

// userText is the text a user message carries ("" for tool results).
func userText(m protocol.Message) string {
	if m.Role != roleUser {
		return ""
	}
	var parts []string
	for _, b := range m.Content {
		switch {
		case b.Type == protocol.BlockText && b.Text != "":
			parts = append(parts, b.Text)
		case b.Type == protocol.BlockImage:
			// The sim cannot look: it names the image, so that an
			// images-only prompt is echoed like any other.
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", b.MimeType, b.Size))
		}
	}
	return strings.Join(parts, "\n")
}

// simStream plays one provider call's directives as provider events. It
// produces them lazily, a directive at a time, so a flood never sits in
// memory as events. Usage (bytes/4 tokens) is reported when the call
// produced content: before EventStop, and also before the error that ends
// a call early (fail, abort), as the partial message is kept.
type simStream struct {
	ctx   context.Context
	sim   *simTurn
	model string
	input int64
	call  []directive // directives not played yet

	out     []provider.Event // events ready to return
	err     error            // terminal result once out is drained
	blocks  int              // content blocks opened
	bytes   int              // content produced, for usage
	toolUse bool
	flood   struct {
		left, index int
		piece       string // the delta, or the filler a stamp is written over
		stamp       bool
		rate        int
		sent        int       // deltas produced so far (paced floods)
		start       time.Time // when the first paced delta was due
		timer       *time.Timer
	}

	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

// Next implements provider.Stream.
func (s *simStream) Next() (provider.Event, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return provider.Event{}, s.err
		}
		select {
		case <-s.done:
			s.finish(protocol.Errorf(protocol.CodeProviderError, "sim: stream closed"))
			continue
		default:
		}
		if s.ctx.Err() != nil {
			s.finish(fmt.Errorf("sim: %w", context.Cause(s.ctx)))
			continue
		}
		s.step()
	}
	ev := s.out[0]
	s.out = s.out[1:]
	return ev, nil
}

// Close implements provider.Stream.
func (s *simStream) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	return nil
}

// step plays the next piece of the call.
func (s *simStream) step() {
	if s.flood.left > 0 {
		s.floodStep()
		return
	}
	if len(s.call) == 0 {
		s.usage()
		stop := provider.StopEndTurn
		if s.toolUse {
			stop = provider.StopToolUse
		}
		s.out = append(s.out, provider.Event{Kind: provider.EventStop, StopReason: stop})
		s.err = io.EOF
		return
	}
	d := s.call[0]
	s.call = s.call[1:]
	s.play(d)
}

// play runs one directive.
func (s *simStream) play(d directive) {
	switch d.kind {
	case dirEcho, dirSay:
		s.text(provider.EventText, d.text)
	case dirThink:
		s.text(provider.EventThinking, d.text)
	case dirTool, dirSubagent:
		s.toolCall(d)
	case dirTeamPlan:
		s.sim.teamCall = s.toolCall(d)
	case dirAsk:
		text, err := s.sim.host.simAsk(d)
		if err != nil {
			s.finish(err)
			return
		}
		s.text(provider.EventText, text)
	case dirSleep:
		timer := time.NewTimer(d.dur)
		defer timer.Stop()
		select { // an abort or Close is noticed by Next
		case <-timer.C:
		case <-s.ctx.Done():
		case <-s.done:
		}
	case dirFlood:
		if d.n > 0 {
			chunk := make([]byte, d.size)
			for i := range chunk {
				chunk[i] = 'a' + byte(i%26)
			}
			s.flood.left, s.flood.index, s.flood.piece = d.n, s.blocks, string(chunk)
			s.flood.stamp, s.flood.rate, s.flood.sent = d.stamp, d.rate, 0
			s.blocks++
		}
	case dirFail, dirInvalid:
		s.finish(protocol.Errorf(protocol.CodeProviderError, "%s", d.text))
	case dirHang:
		s.err = s.sim.host.simHang(d.text == "abort")
	case dirExit:
		s.sim.host.simExit(d.code)
	default:
		s.finish(protocol.Errorf(protocol.CodeProviderError, "sim: unhandled directive"))
	}
}

// floodStep produces the next delta of a flood: for a paced flood it first
// waits until the delta is due (an abort or Close cuts the wait short and
// is noticed by Next), and a stamped delta gets the time it leaves the sim.
func (s *simStream) floodStep() {
	if r := s.flood.rate; r > 0 {
		if s.flood.sent == 0 {
			s.flood.start = time.Now()
		} else if wait := time.Until(s.flood.start.Add(floodDue(s.flood.sent, r))); wait > 0 {
			if s.flood.timer == nil {
				s.flood.timer = time.NewTimer(wait)
			} else {
				s.flood.timer.Reset(wait)
			}
			select {
			case <-s.flood.timer.C:
			case <-s.ctx.Done():
				s.flood.timer.Stop()
				return
			case <-s.done:
				s.flood.timer.Stop()
				return
			}
		}
	}
	piece := s.flood.piece
	if s.flood.stamp {
		buf := []byte(piece)
		stampDelta(buf, time.Now())
		piece = string(buf)
	}
	s.flood.left--
	s.flood.sent++
	s.bytes += len(piece)
	s.out = append(s.out, provider.Event{Kind: provider.EventText, Index: s.flood.index, Text: piece})
	if s.flood.left == 0 && s.flood.timer != nil {
		s.flood.timer.Stop()
		s.flood.timer = nil
	}
}

// text streams a text or thinking block in a few deltas.
func (s *simStream) text(kind provider.EventKind, text string) {
	idx := s.blocks
	s.blocks++
	for _, p := range pieces(text, textPieces) {
		s.bytes += len(p)
		s.out = append(s.out, provider.Event{Kind: kind, Index: idx, Text: p})
	}
}

// toolCall streams a tool-call block: its start (id and name), then the
// JSON arguments in fragments. It returns the call's id.
func (s *simStream) toolCall(d directive) string {
	idx := s.blocks
	s.blocks++
	s.toolUse = true
	s.bytes += len(protocol.MustMarshal(d.args))
	id := s.sim.ids.next("tc")
	s.out = append(s.out, provider.Event{Kind: provider.EventToolCallStart, Index: idx, ToolCallID: id, ToolName: d.tool})
	for _, frag := range pieces(d.rawArgs, textPieces) {
		s.out = append(s.out, provider.Event{Kind: provider.EventToolCallArgs, Index: idx, ArgsDelta: frag})
	}
	return id
}

// finish ends the call early with err, after the usage of what it
// produced.
func (s *simStream) finish(err error) {
	s.usage()
	s.err = err
}

// usage queues the call's usage, when it produced content.
func (s *simStream) usage() {
	if s.blocks == 0 {
		return
	}
	output := tokens(s.bytes)
	s.out = append(s.out, provider.Event{Kind: provider.EventUsage, Usage: &protocol.Usage{
		Input: s.input, Output: output, ContextTokens: s.input + output, Model: s.model,
	}})
}

// windowBytes is the sim size of a conversation.
func windowBytes(w []protocol.Message) int {
	n := 0
	for _, m := range w {
		n += contentBytes(m.Content)
	}
	return n
}
