package main

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// table aligns tab-separated cells into columns, like text/tabwriter with
// padding 2, but measures a cell by what a terminal shows: the SGR color
// sequences of palette take no width. (tabwriter counts their bytes, so a
// colored column pushed every later column of the header and of the plain
// rows out of line.) Write it like a tabwriter — cells end with "\t", rows
// with "\n" — and Flush at the end. Consecutive lines with cells form a
// block whose columns are aligned together; a line without tabs ends a
// block and is written as is.
//
// Cells must come from sanitized data (safe/safeAll), so a tab or newline
// in a name cannot split a cell or forge a row.
type table struct {
	w io.Writer
	// skip drops that many leading lines: the header with --no-headers.
	skip int
	buf  bytes.Buffer
}

// tablePadding is the space between columns.
const tablePadding = 2

// newTable returns a table writing to w.
func newTable(w io.Writer) *table { return &table{w: w} }

// newTableNoHeader is newTable that drops the first line (the header) when
// noHeaders is set.
func newTableNoHeader(w io.Writer, noHeaders bool) *table {
	t := &table{w: w}
	if noHeaders {
		t.skip = 1
	}
	return t
}

func (t *table) Write(p []byte) (int, error) { return t.buf.Write(p) }

// Flush aligns and writes everything written so far.
func (t *table) Flush() error {
	text := t.buf.String()
	t.buf.Reset()
	if text == "" {
		return nil
	}
	trailing := strings.HasSuffix(text, "\n")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if t.skip > 0 {
		n := min(t.skip, len(lines))
		lines, t.skip = lines[n:], t.skip-n
	}
	var out strings.Builder
	for i := 0; i < len(lines); {
		if !strings.Contains(lines[i], "\t") {
			out.WriteString(lines[i])
			out.WriteByte('\n')
			i++
			continue
		}
		j := i
		for j < len(lines) && strings.Contains(lines[j], "\t") {
			j++
		}
		writeBlock(&out, lines[i:j])
		i = j
	}
	s := out.String()
	if !trailing {
		s = strings.TrimSuffix(s, "\n")
	}
	_, err := io.WriteString(t.w, s)
	return err
}

// writeBlock aligns a block of lines with cells. A line's last piece (after
// its last tab) is not a column: it takes no part in the widths.
func writeBlock(out *strings.Builder, lines []string) {
	rows := make([][]string, len(lines))
	var widths []int
	for i, l := range lines {
		rows[i] = strings.Split(l, "\t")
		for c, cell := range rows[i][:len(rows[i])-1] {
			if c == len(widths) {
				widths = append(widths, 0)
			}
			widths[c] = max(widths[c], visibleWidth(cell))
		}
	}
	for _, cells := range rows {
		var line strings.Builder
		for c, cell := range cells {
			line.WriteString(cell)
			if c < len(cells)-1 {
				line.WriteString(strings.Repeat(" ", widths[c]-visibleWidth(cell)+tablePadding))
			}
		}
		out.WriteString(line.String())
		out.WriteByte('\n')
	}
}

// visibleWidth is the number of runes of s outside ANSI CSI sequences
// (ESC [ … final byte), which is what a terminal shows of a sanitized,
// painted cell.
func visibleWidth(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j + 1
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		n++
		i += size
	}
	return n
}
