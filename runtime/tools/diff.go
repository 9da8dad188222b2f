package tools

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// Diff parameters.
const (
	// diffContext is the number of unchanged lines around each change.
	diffContext = 3
	// diffMaxEdits bounds the Myers search (edit distance in lines); past
	// it the differing middle is shown as removed, then added.
	diffMaxEdits = 2000
	// noNewline follows a line that ends its file without a newline.
	noNewline = `\ No newline at end of file`
)

// edit is one line of an edit script: ' ' kept, '-' removed, '+' added.
type edit struct {
	op   byte
	line string // with its "\n", if it has one
}

// splitLines splits s into lines that keep their "\n".
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// diffHunks returns the unified-diff hunks that turn old into new, with
// diffContext lines of context. Lines carry a one-character prefix
// (" ", "-", "+") and no newline; a line that ends its file without one is
// followed by `\ No newline at end of file`. Equal texts have no hunks.
func diffHunks(old, new string) []protocol.Hunk {
	return groupHunks(diffEdits(splitLines(old), splitLines(new)))
}

// diffEdits is the edit script from a to b: common prefix and suffix,
// and a shortest edit script (Myers) of the middle.
func diffEdits(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	edits := make([]edit, 0, len(a)+len(b)-pre-suf)
	for _, l := range a[:pre] {
		edits = append(edits, edit{' ', l})
	}
	am, bm := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if mid, ok := myers(am, bm, diffMaxEdits); ok {
		edits = append(edits, mid...)
	} else {
		for _, l := range am {
			edits = append(edits, edit{'-', l})
		}
		for _, l := range bm {
			edits = append(edits, edit{'+', l})
		}
	}
	for _, l := range a[len(a)-suf:] {
		edits = append(edits, edit{' ', l})
	}
	return edits
}

// myers computes a shortest edit script from a to b (E. Myers, "An O(ND)
// Difference Algorithm", 1986), keeping each round's frontier to backtrack.
// It gives up (ok false) past maxD edits, bounding time and memory.
func myers(a, b []string, maxD int) (edits []edit, ok bool) {
	n, m := len(a), len(b)
	if n == 0 && m == 0 {
		return nil, true
	}
	limit := min(n+m, maxD)
	off := n + m + 1
	v := make([]int, 2*off+1)
	var trace [][]int // trace[d][k+d] is v[k] before round d
	for d := 0; d <= limit; d++ {
		trace = append(trace, slices.Clone(v[off-d:off+d+1]))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace), true
			}
		}
	}
	return nil, false
}

// backtrack walks the Myers frontiers from the end to the start.
func backtrack(a, b []string, trace [][]int) []edit {
	var rev []edit
	x, y := len(a), len(b)
	for d := len(trace) - 1; d > 0; d-- {
		v := trace[d]
		at := func(k int) int { return v[k+d] }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, edit{' ', a[x]})
		}
		if x == px {
			y--
			rev = append(rev, edit{'+', b[y]})
		} else {
			x--
			rev = append(rev, edit{'-', a[x]})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, edit{' ', a[x]})
	}
	slices.Reverse(rev)
	return rev
}

// groupHunks gathers an edit script into hunks with diffContext lines of
// context, merging changes no more than 2*diffContext lines apart.
func groupHunks(edits []edit) []protocol.Hunk {
	// oldAt[i], newAt[i]: lines of each side consumed before edits[i].
	oldAt := make([]int, len(edits)+1)
	newAt := make([]int, len(edits)+1)
	for i, e := range edits {
		oldAt[i+1], newAt[i+1] = oldAt[i], newAt[i]
		if e.op != '+' {
			oldAt[i+1]++
		}
		if e.op != '-' {
			newAt[i+1]++
		}
	}
	var hunks []protocol.Hunk
	prevEnd := 0
	for i := 0; i < len(edits); i++ {
		if edits[i].op == ' ' {
			continue
		}
		start := max(i-diffContext, prevEnd)
		last := i
		for j := i + 1; j < len(edits) && j-last-1 <= 2*diffContext; j++ {
			if edits[j].op != ' ' {
				last = j
			}
		}
		end := min(last+diffContext+1, len(edits))
		h := protocol.Hunk{
			OldLines: oldAt[end] - oldAt[start],
			NewLines: newAt[end] - newAt[start],
			Lines:    make([]string, 0, end-start),
		}
		h.OldStart, h.NewStart = oldAt[start], newAt[start]
		if h.OldLines > 0 {
			h.OldStart++
		}
		if h.NewLines > 0 {
			h.NewStart++
		}
		for _, e := range edits[start:end] {
			text, hasNL := strings.CutSuffix(e.line, "\n")
			h.Lines = append(h.Lines, string(e.op)+text)
			if !hasNL {
				h.Lines = append(h.Lines, noNewline)
			}
		}
		hunks = append(hunks, h)
		prevEnd = end
		i = end - 1
	}
	return hunks
}

// capHunks keeps hunks while their lines total at most max bytes. A hunk
// that does not fit whole is cut after the lines that fit and its counts
// recomputed, so that every kept hunk stays consistent; later hunks are
// dropped. It reports whether it cut anything.
func capHunks(hunks []protocol.Hunk, max int) ([]protocol.Hunk, bool) {
	used := 0
	for i, h := range hunks {
		size := 0
		for _, l := range h.Lines {
			size += len(l) + 1
		}
		if used+size <= max {
			used += size
			continue
		}
		cut := protocol.Hunk{OldStart: h.OldStart, NewStart: h.NewStart}
		for _, l := range h.Lines {
			if used+len(l)+1 > max {
				break
			}
			used += len(l) + 1
			cut.Lines = append(cut.Lines, l)
			switch l[0] {
			case ' ':
				cut.OldLines++
				cut.NewLines++
			case '-':
				cut.OldLines++
			case '+':
				cut.NewLines++
			}
		}
		out := slices.Clone(hunks[:i])
		if len(cut.Lines) > 0 {
			out = append(out, cut)
		}
		return out, true
	}
	return hunks, false
}

// unified renders hunks as the text of a unified diff of path.
func unified(path string, hunks []protocol.Hunk) string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", path, path)
	for _, h := range hunks {
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", h.OldStart, h.OldLines, h.NewStart, h.NewLines)
		for _, l := range h.Lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// diffRender is the "diff" render descriptor of a change to the file shown
// as path, capped at max bytes of diff lines.
func diffRender(path, old, new string, max int) *protocol.RenderDescriptor {
	hunks, _ := capHunks(diffHunks(old, new), max)
	return &protocol.RenderDescriptor{Kind: RenderDiff, Path: path, Hunks: hunks}
}

// DiffRender is the "diff" render descriptor of the change from old to new
// of the file shown as path, capped at DefaultMaxOutput bytes of diff lines
// (for adapters that show a third-party agent's file changes).
func DiffRender(path, old, new string) *protocol.RenderDescriptor {
	return diffRender(path, old, new, DefaultMaxOutput)
}
