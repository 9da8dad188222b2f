package refagent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

func TestParseDirective(t *testing.T) {
	tests := []struct {
		in   string
		want directive
	}{
		{"say hello  world", directive{kind: dirSay, text: "hello  world"}},
		{"think hmm", directive{kind: dirThink, text: "hmm"}},
		{`tool read {"path": "a b.txt"}`, directive{kind: dirTool, tool: "read", args: map[string]any{"path": "a b.txt"}, rawArgs: `{"path":"a b.txt"}`}},
		{"tool read", directive{kind: dirTool, tool: "read", args: map[string]any{}, rawArgs: `{}`}},
		{`ask select "Pick one" a "b c"`, directive{kind: dirAsk, ui: protocol.UIRequest{Kind: "select", Title: "Pick one", Options: []string{"a", "b c"}}}},
		{`ask multi Toppings ham egg "green pepper" message="pick any"`, directive{kind: dirAsk, ui: protocol.UIRequest{Kind: "select", Multiple: true,
			Title: "Toppings", Options: []string{"ham", "egg", "green pepper"}, Message: "pick any"}}},
		{"ask confirm Sure?", directive{kind: dirAsk, ui: protocol.UIRequest{Kind: "confirm", Title: "Sure?"}}},
		{"ask confirm Go on", directive{kind: dirAsk, ui: protocol.UIRequest{Kind: "confirm", Title: "Go on"}}},
		{`ask input Name placeholder="your name" prefill=Ada`, directive{kind: dirAsk, ui: protocol.UIRequest{Kind: "input", Title: "Name", Placeholder: "your name", Prefill: "Ada"}}},
		{`ask editor "Commit message" prefill="fix: \"x\""`, directive{kind: dirAsk, ui: protocol.UIRequest{Kind: "editor", Title: "Commit message", Prefill: `fix: "x"`}}},
		{"ask notify Build done type=warning", directive{kind: dirAsk, ui: protocol.UIRequest{Kind: "notify", Title: "Build done", NotifyType: "warning"}}},
		{"sleep 250", directive{kind: dirSleep, dur: 250 * time.Millisecond}},
		{"flood 3 10", directive{kind: dirFlood, n: 3, size: 10}},
		{"flood 3 20 stamp", directive{kind: dirFlood, n: 3, size: 20, stamp: true}},
		{"flood 3 10 rate 5000", directive{kind: dirFlood, n: 3, size: 10, rate: 5000}},
		{"flood 3 64 stamp rate 5000", directive{kind: dirFlood, n: 3, size: 64, stamp: true, rate: 5000}},
		{"flood  3  64  rate 1  stamp", directive{kind: dirFlood, n: 3, size: 64, stamp: true, rate: 1}},
		{"fail boom now", directive{kind: dirFail, text: "boom now"}},
		{"fail", directive{kind: dirFail, text: "sim provider failure"}},
		{"hang", directive{kind: dirHang}},
		{"exit 7", directive{kind: dirExit, code: 7}},
		{"subagent scout map the repo", directive{kind: dirSubagent, tool: "subagent", args: map[string]any{"action": "create", "name": "scout", "task": "map the repo"}, rawArgs: `{"action":"create","name":"scout","task":"map the repo"}`}},
	}
	for _, tt := range tests {
		got := parseDirective(tt.in)
		if got.kind != tt.want.kind || got.text != tt.want.text || got.tool != tt.want.tool || got.rawArgs != tt.want.rawArgs ||
			!reflect.DeepEqual(got.ui, tt.want.ui) ||
			got.dur != tt.want.dur || got.n != tt.want.n || got.size != tt.want.size || got.stamp != tt.want.stamp || got.rate != tt.want.rate ||
			got.code != tt.want.code {
			t.Errorf("parseDirective(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if tt.want.args != nil && string(mustJSON(t, got.args)) != string(mustJSON(t, tt.want.args)) {
			t.Errorf("parseDirective(%q).args = %v, want %v", tt.in, got.args, tt.want.args)
		}
	}
}

func TestParseDirectiveRejects(t *testing.T) {
	for _, in := range []string{
		"", "dance", "say", "tool", "tool read [1,2]", "tool read {} {}", "tool read {bad",
		"ask", "ask select", "ask pick title", `ask select "unterminated`, "ask select Title", "ask multi Title",
		"ask notify Done type=loud", `ask editor Title prefill="open`, `ask input ""`,
		"sleep", "sleep -1", "sleep soon", "flood 1", "flood -1 5", "flood 2 0", "flood 100000000 100",
		"flood 2 19 stamp", "flood 2 64 stamp stamp", "flood 2 64 rate", "flood 2 64 rate 0", "flood 2 64 rate -5",
		"flood 2 64 rate fast", "flood 2 64 rate 10 rate 20", "flood 2 64 stamped", "flood 2 64 stamp 5", "flood 1000000 100 stamp",
		"exit", "exit x", "subagent",
	} {
		if d := parseDirective(in); d.kind != dirInvalid || !strings.HasPrefix(d.text, "sim: ") {
			t.Errorf("parseDirective(%q) = %+v, want invalid", in, d)
		}
	}
}

func TestFloodDue(t *testing.T) {
	tests := []struct {
		i, rate int
		want    time.Duration
	}{
		{0, 5000, 0},
		{1, 5000, 200 * time.Microsecond},
		{4999, 5000, 999800 * time.Microsecond},
		{5000, 5000, time.Second},
		{1, 3, 333333333},
		{3, 3, time.Second},
		{10_000_000, 1, 10_000_000 * time.Second}, // no overflow
	}
	for _, tt := range tests {
		if got := floodDue(tt.i, tt.rate); got != tt.want {
			t.Errorf("floodDue(%d, %d) = %v, want %v", tt.i, tt.rate, got, tt.want)
		}
	}
}

func TestFloodStampRoundTrip(t *testing.T) {
	for _, ns := range []int64{0, 1, 1_700_000_000_123_456_789, 9_223_372_036_854_775_807} {
		buf := []byte(strings.Repeat("x", stampWidth+3))
		stampDelta(buf, time.Unix(0, ns))
		if buf[stampWidth-1] != ' ' || string(buf[stampWidth:]) != "xxx" {
			t.Errorf("stampDelta(%d) = %q: stamp overran its width", ns, buf)
		}
		got, ok := ParseFloodStamp(string(buf))
		if !ok || got != ns {
			t.Errorf("ParseFloodStamp(%q) = %d, %v; want %d", buf, got, ok, ns)
		}
	}
	for _, text := range []string{"", "123", "abcdefghijklmnopqrstuvwxyz", "1700000000123456789x", "170000000012345678 9 "} {
		if _, ok := ParseFloodStamp(text); ok {
			t.Errorf("ParseFloodStamp(%q) = ok, want no stamp", text)
		}
	}
}

// playFlood plays the single directive msg through a sim provider call and
// returns the text of its deltas.
func playFlood(t *testing.T, msg string) ([]string, error) {
	t.Helper()
	sim := newSimTurn(nil, "m1", newIDGen(), 1<<30)
	st, err := sim.Stream(t.Context(), provider.Request{Messages: []protocol.Message{
		{ID: "m1", Role: roleUser, Content: []protocol.ContentBlock{{Type: protocol.BlockText, Text: msg}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var texts []string
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return texts, nil
		}
		if err != nil {
			return texts, err
		}
		if ev.Kind == provider.EventText {
			if ev.Index != 0 {
				t.Fatalf("delta in block %d, want 0", ev.Index)
			}
			texts = append(texts, ev.Text)
		}
	}
}

func TestFloodStampedAndPaced(t *testing.T) {
	const n, size = 50, 64
	before := time.Now().UnixNano()
	texts, err := playFlood(t, "sim: flood 50 64 stamp rate 20000")
	after := time.Now().UnixNano()
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) != n {
		t.Fatalf("%d deltas, want %d", len(texts), n)
	}
	filler := strings.Repeat("abcdefghijklmnopqrstuvwxyz", 3)[stampWidth:size]
	var prev int64
	for i, text := range texts {
		if len(text) != size {
			t.Fatalf("delta %d is %d bytes, want %d (padded)", i, len(text), size)
		}
		if text[stampWidth:] != filler {
			t.Fatalf("delta %d padding %q, want %q", i, text[stampWidth:], filler)
		}
		ns, ok := ParseFloodStamp(text)
		if !ok {
			t.Fatalf("delta %d has no stamp: %q", i, text)
		}
		// Wall-clock stamps taken as the deltas leave, in order.
		if ns < before || ns > after || ns < prev {
			t.Fatalf("delta %d stamp %d out of order (previous %d, flood ran %d..%d)", i, ns, prev, before, after)
		}
		prev = ns
	}
	first, _ := ParseFloodStamp(texts[0])
	if prev <= first {
		t.Fatalf("stamps did not increase over a paced flood: first %d, last %d", first, prev)
	}
}

func TestFloodUnstampedUnchanged(t *testing.T) {
	for _, msg := range []string{"sim: flood 3 30", "sim: flood 3 30 rate 100000"} {
		texts, err := playFlood(t, msg)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat("abcdefghijklmnopqrstuvwxyz", 2)[:30]
		if len(texts) != 3 || texts[0] != want || texts[2] != want {
			t.Fatalf("%s: deltas %q, want 3 × %q", msg, texts, want)
		}
	}
}

func TestFloodPacingStopsOnCancel(t *testing.T) {
	// The next delta is due in an hour: an abort (the context) or Close
	// must end the wait, produce nothing and leave the delta unsent.
	for _, how := range []string{"cancel", "close"} {
		ctx, cancel := context.WithCancel(t.Context())
		s := &simStream{ctx: ctx, done: make(chan struct{})}
		s.flood.left, s.flood.rate, s.flood.sent, s.flood.piece = 2, 1, 1, strings.Repeat("a", 20)
		s.flood.start = time.Now().Add(time.Hour)
		if how == "cancel" {
			cancel()
		} else {
			_ = s.Close()
		}
		s.floodStep()
		if len(s.out) != 0 || s.flood.left != 2 || s.flood.sent != 1 {
			t.Errorf("%s: floodStep produced %d events (left %d, sent %d), want none", how, len(s.out), s.flood.left, s.flood.sent)
		}
		cancel()
	}
}

func TestParseDirectivesEchoesPlainMessages(t *testing.T) {
	got := parseDirectives("just words\nsim:nothing here")
	if len(got) != 1 || got[0].kind != dirInvalid {
		t.Fatalf("a sim: line is a directive even without a space: %+v", got)
	}
	got = parseDirectives("hello\nthere")
	if len(got) != 1 || got[0].kind != dirEcho || got[0].text != "You said: hello\nthere" {
		t.Fatalf("plain message: %+v", got)
	}
	got = parseDirectives("intro text\n  sim: say one\r\nsim: say two")
	if len(got) != 2 || got[0].text != "one" || got[1].text != "two" {
		t.Fatalf("directives %+v", got)
	}
}

func TestPieces(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want []string
	}{
		{"", 4, nil},
		{"a", 4, []string{"a"}},
		{"{}", 4, []string{"{", "}"}},
		{"abcdefgh", 4, []string{"ab", "cd", "ef", "gh"}},
		{"abcdefghi", 4, []string{"abc", "def", "ghi"}},
		{"héllo wörld", 3, []string{"héll", "o wö", "rld"}},
	}
	for _, tt := range tests {
		if got := pieces(tt.in, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("pieces(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestTokens(t *testing.T) {
	for in, want := range map[int]int64{0: 0, 1: 1, 3: 1, 4: 1, 8: 2, 401: 100} {
		if got := tokens(in); got != want {
			t.Errorf("tokens(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestGrantKeyIsCanonical(t *testing.T) {
	a := parseDirective(`tool write {"path":"x","content":"1"}`)
	b := parseDirective(`tool write { "content" : "1", "path" : "x" }`)
	c := parseDirective(`tool write {"path":"x","content":"2"}`)
	ka := grantKey(toolCallReq{name: a.tool, args: a.args})
	kb := grantKey(toolCallReq{name: b.tool, args: b.args})
	kc := grantKey(toolCallReq{name: c.tool, args: c.args})
	if ka != kb || ka == kc {
		t.Fatalf("keys %q %q %q", ka, kb, kc)
	}
}

func TestParseTranscript(t *testing.T) {
	line := `{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}` // the format before entry types
	line2 := `{"type":"message","id":"m2","role":"assistant","content":[{"type":"text","text":"yo"}]}`
	cmp := `{"type":"compaction","id":"cmp-1","index":1,"summary":"s","first_kept_entry_id":"m2","message_range":["m1","m1"]}`
	tests := []struct {
		name    string
		data    string
		msgs    int
		keep    int
		addNL   bool
		corrupt bool
	}{
		{"empty", "", 0, 0, false, false},
		{"one", line + "\n", 1, len(line) + 1, false, false},
		{"torn", line + "\n" + `{"id":"m2","ro`, 1, len(line) + 1, false, false},
		{"whole but unterminated", line + "\n" + line2, 2, len(line) + len(line2) + 1, true, false},
		{"blank lines", "\n" + line + "\n\n", 1, len(line) + 3, false, false},
		{"compaction", line + "\n" + line2 + "\n" + cmp + "\n", 3, len(line) + len(line2) + len(cmp) + 3, false, false},
		{"corrupt middle", "nope\n" + line + "\n", 0, 0, false, true},
		{"bad role", `{"id":"m","role":"system","content":[]}` + "\n", 0, 0, false, true},
		{"no id", `{"type":"message","role":"user","content":[]}` + "\n", 0, 0, false, true},
		{"duplicate id", line + "\n" + line + "\n", 0, 0, false, true},
		{"duplicate id unterminated", line + "\n" + line, 0, 0, false, true},
		{"unknown type", `{"type":"branch","id":"b"}` + "\n", 0, 0, false, true},
		{"compaction without range", `{"type":"compaction","id":"c","index":1,"summary":"s","first_kept_entry_id":"m1"}` + "\n", 0, 0, false, true},
		{"checkpoint of unknown kind", `{"type":"checkpoint","id":"k","artifactKind":"branch"}` + "\n", 0, 0, false, true},
	}
	for _, tt := range tests {
		msgs, keep, addNL, err := parseTranscript([]byte(tt.data))
		if (err != nil) != tt.corrupt {
			t.Errorf("%s: err %v", tt.name, err)
			continue
		}
		if !tt.corrupt && (len(msgs) != tt.msgs || keep != tt.keep || addNL != tt.addNL) {
			t.Errorf("%s: %d msgs keep %d addNL %v; want %d %d %v", tt.name, len(msgs), keep, addNL, tt.msgs, tt.keep, tt.addNL)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParseDirective: a directive line never panics the parser, a
// malformed one is dirInvalid naming the sim, and an ask that parses is a
// request the ask tool would open (a known kind, a title, options only on
// a select).
func FuzzParseDirective(f *testing.F) {
	for _, s := range []string{`ask multi "Pick" a "b c" message="m"`, `ask editor T prefill="x\"y"`, "ask notify Done type=error",
		`ask select T a=b "c`, `tool read {"path":"a"}`, "flood 3 20 stamp rate 5", `ask input k="`, "subagent a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := parseDirective(s)
		switch d.kind {
		case dirInvalid:
			if !strings.HasPrefix(d.text, "sim: ") {
				t.Fatalf("invalid directive %q says %q", s, d.text)
			}
		case dirAsk:
			u := d.ui
			known := slices.Contains([]string{protocol.UISelect, protocol.UIConfirm, protocol.UIInput, protocol.UIEditor, protocol.UINotify}, u.Kind)
			if !known || strings.TrimSpace(u.Title) == "" || (u.Kind == protocol.UISelect) != (len(u.Options) > 0) || u.Multiple && u.Kind != protocol.UISelect {
				t.Fatalf("ask %q parsed to %+v", s, u)
			}
		}
	})
}
