package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
	"golang.org/x/term"

	"github.com/shard-dev/shard/protocol"
)

// Output formats of -o/--output.
const (
	formatTable = "table"
	formatWide  = "wide" // the table with whole ids and absolute times
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// outputOptions is the -o/--output flag of read commands.
type outputOptions struct {
	format string
}

// AddFlags registers -o/--output on fs.
func (o *outputOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.format, "output", "o", formatTable, "output format: table, wide (whole ids, absolute times), json or yaml")
}

// validate rejects an unknown format as a usage error.
func (o *outputOptions) validate() error {
	switch o.format {
	case formatTable, formatWide, formatJSON, formatYAML:
		return nil
	}
	return usageErrorf("invalid --output %q: want table, wide, json or yaml", o.format)
}

// structured reports whether the output is JSON or YAML (not a table).
func (o *outputOptions) structured() bool { return o.format == formatJSON || o.format == formatYAML }

// write prints v as JSON or YAML; it must only be called when structured.
func (o *outputOptions) write(w io.Writer, v any) error {
	if o.format == formatYAML {
		return writeYAML(w, v)
	}
	return writeJSON(w, v)
}

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// writeYAML writes v as YAML with exactly the fields, names and order of
// its JSON form: v goes through encoding/json first (so the json tags are
// the single source of field names), and the JSON document, which is YAML,
// is re-emitted in block style.
func writeYAML(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("write yaml: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("write yaml: %w", err)
	}
	blockStyle(&doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("write yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("write yaml: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write yaml: %w", err)
	}
	return nil
}

// blockStyle clears the flow style JSON input gives every node. Scalars
// keep their tags, so the encoder still quotes strings like "true" or "1"
// that would otherwise read as another type.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// termWidth is the width of w when it is a terminal; 0 means "not a
// terminal: never truncate".
func termWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width <= 0 {
		return 80
	}
	return width
}

// fit shortens s to n runes on a terminal (width > 0) and leaves it whole
// otherwise; it always folds s onto one line.
func fit(s string, n, width int) string {
	if width <= 0 {
		return strings.Join(strings.Fields(s), " ")
	}
	return truncate(s, n)
}

// palette colors text for a terminal; the zero palette leaves text plain.
type palette struct{ enabled bool }

// newPalette enables color only when w is a terminal, --no-color is unset
// and NO_COLOR is empty.
func newPalette(w io.Writer, noColor bool) palette {
	if noColor || os.Getenv("NO_COLOR") != "" {
		return palette{}
	}
	return palette{enabled: isTerminal(w)}
}

// ANSI SGR codes; table measures cells without them.
const (
	sgrReset  = "\x1b[0m"
	sgrRed    = "\x1b[31m"
	sgrGreen  = "\x1b[32m"
	sgrYellow = "\x1b[33m"
	sgrBlue   = "\x1b[34m"
	sgrCyan   = "\x1b[36m"
	sgrDim    = "\x1b[02m"
	sgrBold   = "\x1b[01m"
)

func (p palette) paint(sgr, s string) string {
	if !p.enabled {
		return s
	}
	return sgr + s + sgrReset
}

func (p palette) dim(s string) string  { return p.paint(sgrDim, s) }
func (p palette) bold(s string) string { return p.paint(sgrBold, s) }
func (p palette) red(s string) string  { return p.paint(sgrRed, s) }

// status colors an agent status by how much it needs attention.
func (p palette) status(s protocol.AgentStatus) string {
	switch s {
	case protocol.StatusIdle:
		return p.paint(sgrGreen, string(s))
	case protocol.StatusStreaming, protocol.StatusCompacting:
		return p.paint(sgrCyan, string(s))
	case protocol.StatusWaitingForPermission, protocol.StatusWaitingForUI:
		return p.paint(sgrYellow, string(s))
	case protocol.StatusError:
		return p.paint(sgrRed, string(s))
	}
	return p.paint(sgrDim, orDash(string(s)))
}

// runState colors a run state: green done, cyan moving, blue waiting, red
// failed, yellow stopped.
func (p palette) runState(s protocol.RunState) string {
	switch s {
	case protocol.RunCompleted:
		return p.paint(sgrGreen, string(s))
	case protocol.RunStarting, protocol.RunActive:
		return p.paint(sgrCyan, string(s))
	case protocol.RunQueued:
		return p.paint(sgrBlue, string(s))
	case protocol.RunFailed, protocol.RunTimedOut, protocol.RunInterrupted:
		return p.paint(sgrRed, string(s))
	case protocol.RunCancelled:
		return p.paint(sgrYellow, string(s))
	}
	return p.paint(sgrDim, orDash(string(s)))
}

// jobState colors a job state like the run states it derives from.
func (p palette) jobState(s protocol.JobState) string {
	switch s {
	case protocol.JobCompleted:
		return p.paint(sgrGreen, string(s))
	case protocol.JobRunning:
		return p.paint(sgrCyan, string(s))
	case protocol.JobQueued:
		return p.paint(sgrBlue, string(s))
	case protocol.JobFailed:
		return p.paint(sgrRed, string(s))
	case protocol.JobCancelled:
		return p.paint(sgrYellow, string(s))
	}
	return p.paint(sgrDim, orDash(string(s)))
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// truncate shortens s to at most n runes, marking the cut with "…", and
// folds it onto one line.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// quote renders streamed text on one line: Go-quoted, shortened.
func quote(s string, n int) string {
	q := strconv.Quote(s)
	if utf8.RuneCountInString(q) <= n {
		return q
	}
	r := []rune(q)
	return string(r[:n-2]) + "…\""
}

// humanBytes formats a byte count with binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// timeLayout formats times in tables, in the clock's location.
const timeLayout = "2006-01-02 15:04:05"

// tableStyle is how a list table renders: -o table shortens agent ids to
// unique prefixes (they resolve back, see names.go) and shows times as
// ages ("5m ago"); -o wide shows whole ids and absolute times; --no-headers
// drops the header line.
type tableStyle struct {
	wide, noHeaders bool
	short           map[string]string // agent id → short id (table only)
}

// style is the table style of these options.
func (o *outputOptions) style(g *globalOptions) tableStyle {
	return tableStyle{wide: o.format == formatWide, noHeaders: g.noHeaders}
}

// shorten prepares the short forms of the agent ids a table shows.
func (s *tableStyle) shorten(agentIDs []string) {
	if !s.wide {
		s.short = shortIDs(agentIDs)
	}
}

// agent renders an agent id for the table ("-" for none).
func (s tableStyle) agent(id string) string {
	if short, ok := s.short[id]; ok && !s.wide && short != "" {
		return short
	}
	return orDash(id)
}

// when renders a time for the table: its age, or absolute with -o wide.
func (s tableStyle) when(c clock, ms int64) string {
	if s.wide {
		return c.formatTime(ms)
	}
	return c.ago(ms)
}

// ago renders epoch milliseconds as an age: "just now", "45s ago",
// "5m ago", "3h ago", "2d ago"; "-" for zero. Times ahead of the clock
// (another host's skew) read "in 5s".
func (c clock) ago(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	d := c.now().Sub(time.UnixMilli(ms))
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d.Hours()))
	default:
		s = fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// formatTime renders epoch milliseconds, or "-" for zero.
func (c clock) formatTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).In(c.loc).Format(timeLayout)
}

// formatMs renders a duration in milliseconds compactly: 850ms, 12.3s,
// 4m05s, 2h03m.
func formatMs(ms int64) string {
	if ms < 0 {
		ms = 0
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// span renders the time from start to end (or to now while end is zero),
// "-" when it never started.
func (c clock) span(start, end int64) string {
	if start <= 0 {
		return "-"
	}
	if end <= 0 {
		return formatMs(c.now().UnixMilli()-start) + "+"
	}
	return formatMs(end - start)
}

// human escapes the control characters of every string in v (a pointer to
// what the daemon said) when the output is for people: see sanitize.go.
func (o *outputOptions) human(v any) {
	if !o.structured() {
		safeAll(v)
	}
}
