package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/shard-dev/shard/protocol"
)

// Output formats of -o/--output.
const (
	formatTable = "table"
	formatJSON  = "json"
)

// outputOptions is the -o/--output flag of read commands.
type outputOptions struct {
	format string
}

// AddFlags registers -o/--output on fs.
func (o *outputOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.format, "output", "o", formatTable, "output format: table or json")
}

// validate rejects an unknown format as a usage error.
func (o *outputOptions) validate() error {
	switch o.format {
	case formatTable, formatJSON:
		return nil
	}
	return usageErrorf("invalid --output %q: want table or json", o.format)
}

func (o *outputOptions) json() bool { return o.format == formatJSON }

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

// palette colors text for a terminal; the zero palette leaves text plain.
type palette struct{ enabled bool }

// newPalette enables color only when w is a terminal, --no-color is unset
// and NO_COLOR is empty.
func newPalette(w io.Writer, noColor bool) palette {
	if noColor || os.Getenv("NO_COLOR") != "" {
		return palette{}
	}
	f, ok := w.(*os.File)
	return palette{enabled: ok && term.IsTerminal(int(f.Fd()))}
}

// ANSI SGR codes; all the same length so that tabwriter columns line up.
const (
	sgrReset  = "\x1b[0m"
	sgrRed    = "\x1b[31m"
	sgrGreen  = "\x1b[32m"
	sgrYellow = "\x1b[33m"
	sgrCyan   = "\x1b[36m"
	sgrDim    = "\x1b[02m"
)

func (p palette) paint(sgr, s string) string {
	if !p.enabled {
		return s
	}
	return sgr + s + sgrReset
}

func (p palette) dim(s string) string { return p.paint(sgrDim, s) }

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
	return p.paint(sgrDim, string(s))
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
