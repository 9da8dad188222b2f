package tools

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// marker says how much output was cut (docs/protocol.md §2.3).
func marker(cutBytes, cutLines int64) string {
	return markerNote(cutBytes, cutLines, "")
}

// markerNote is a marker with a note before its closing bracket, such as
// how to read on.
func markerNote(cutBytes, cutLines int64, note string) string {
	unit := "lines"
	if cutLines == 1 {
		unit = "line"
	}
	if note != "" {
		note = " " + note
	}
	return fmt.Sprintf("[… truncated %d bytes (%d %s) …%s]", cutBytes, cutLines, unit, note)
}

// countLines is the number of lines s touches: its newlines, plus one for
// a final line without a newline.
func countLines(s string) int64 {
	n := int64(strings.Count(s, "\n"))
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// runeFloor moves i (at most len(s)) back to the start of the rune it
// falls in, so that s[:i] does not end in a partial UTF-8 sequence.
func runeFloor(s []byte, i int) int {
	i = min(i, len(s))
	st := i - 1
	for st > 0 && st > i-utf8.UTFMax && !utf8.RuneStart(s[st]) {
		st--
	}
	if st < 0 || utf8.FullRune(s[st:i]) {
		return i
	}
	return st
}

// Truncate keeps at most max bytes of text, cut after the last whole line
// that fits (mid-line, at a rune boundary, when not even one line fits),
// and appends on a line of its own a marker that says how much was cut:
// "[… truncated 123456 bytes (1234 lines) …]". It reports whether it cut.
// A max of zero or less means DefaultMaxOutput.
func Truncate(text string, max int) (string, bool) {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	if len(text) <= max {
		return text, false
	}
	cut := strings.LastIndexByte(text[:max], '\n') + 1
	if cut == 0 {
		cut = runeFloor([]byte(text), max)
	}
	kept, dropped := text[:cut], text[cut:]
	sep := ""
	if kept != "" && !strings.HasSuffix(kept, "\n") {
		sep = "\n"
	}
	return kept + sep + marker(int64(len(dropped)), countLines(dropped)), true
}

// headTail is an io.Writer that keeps the first and the last bytes of what
// is written to it, up to max bytes in all, and counts what it drops from
// the middle. Memory stays bounded by about 2*max whatever is written. It is
// not safe for concurrent use; exec.Cmd writes from one goroutine when
// stdout and stderr share it.
type headTail struct {
	headCap, tailCap int

	head []byte
	tail []byte
	// dropped and droppedNL count the bytes (and newlines among them)
	// discarded between head and tail; last is the final dropped byte.
	dropped   int64
	droppedNL int64
	last      byte
}

// newHeadTail keeps a quarter of max from the start and the rest from the
// end: the end of a command's output is where its errors and summary are.
func newHeadTail(max int) *headTail {
	h := max / 4
	return &headTail{headCap: h, tailCap: max - h}
}

// Write implements io.Writer; it never fails.
func (w *headTail) Write(p []byte) (int, error) {
	n := len(p)
	if room := w.headCap - len(w.head); room > 0 {
		take := min(room, len(p))
		w.head = append(w.head, p[:take]...)
		p = p[take:]
	}
	w.tail = append(w.tail, p...)
	if len(w.tail) > 2*w.tailCap {
		w.drop(len(w.tail) - w.tailCap)
	}
	return n, nil
}

// drop discards the first n bytes of the tail.
func (w *headTail) drop(n int) {
	if n <= 0 {
		return
	}
	w.dropped += int64(n)
	w.droppedNL += int64(bytes.Count(w.tail[:n], []byte{'\n'}))
	w.last = w.tail[n-1]
	w.tail = w.tail[:copy(w.tail, w.tail[n:])]
}

// finish returns what was kept: everything when it fits, otherwise the
// head and the tail, each cut at a line boundary where one exists, with a
// marker in between. Call it once, after the last Write.
func (w *headTail) finish() string {
	if w.dropped == 0 && len(w.head)+len(w.tail) <= w.headCap+w.tailCap {
		return string(w.head) + string(w.tail)
	}
	w.drop(len(w.tail) - w.tailCap)
	head := w.head
	// Cut the head after its last newline; the partial line goes to the
	// dropped middle (it holds no newline).
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 && i < len(head)-1 {
		w.dropped += int64(len(head) - i - 1)
		head = head[:i+1]
	} else if i < 0 {
		cut := runeFloor(head, len(head))
		w.dropped += int64(len(head) - cut)
		head = head[:cut]
	}
	// Start the tail after its first newline unless the dropped middle
	// already ends one.
	if w.last != '\n' {
		if j := bytes.IndexByte(w.tail, '\n'); j >= 0 && j < len(w.tail)-1 {
			w.drop(j + 1)
		} else {
			k := 0
			for k < len(w.tail) && k < utf8.UTFMax && !utf8.RuneStart(w.tail[k]) {
				k++
			}
			w.drop(k)
		}
	}
	lines := w.droppedNL
	if w.last != '\n' {
		lines++
	}
	var b strings.Builder
	b.Write(head)
	if len(head) > 0 && head[len(head)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString(marker(w.dropped, lines))
	b.WriteByte('\n')
	b.Write(w.tail)
	return b.String()
}
