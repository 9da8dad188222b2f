package treediff

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Parse reads unified diff output, as `git diff` writes it (see Workspace
// for the exact flags; a plain `diff -u` without "diff --git" lines is
// accepted too), into a Result bounded by lim.
//
// It never panics. The Result is always non-nil and holds everything that
// could be read; err is non-nil (wrapping ErrMalformed, with the line
// number of the first problem) when the input is not what git produces.
// A caller that trusts its input to be git's may treat err as fatal; a
// viewer may show the best-effort Result.
func Parse(data []byte, lim Limits) (*Result, error) {
	p := &parser{lim: lim.withDefaults(), res: &Result{Files: []File{}}}
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		p.lineNo++
		p.line(string(line))
	}
	if p.inHunk() {
		p.malformed("input ends inside a hunk")
	}
	p.finishFile()
	return p.res, p.err
}

// parser is Parse's state; one per call.
type parser struct {
	lim    Limits
	res    *Result
	err    error // the first ErrMalformed, if any
	lineNo int
	full   bool // the byte cap was reached: no more lines are kept

	cur  *File   // the file being read, nil between files
	keep bool    // cur is within MaxFiles
	hdr  fileHdr // cur's header facts
	hunk int     // index of the kept hunk in cur.Hunks being filled, -1 if none

	oldLeft, newLeft int // lines the current hunk still expects
	oldNo, newNo     int // next line numbers
	lastKept         bool
}

// fileHdr collects what the header lines of one file say; finishFile turns
// it into path and status.
type fileHdr struct {
	gitOld, gitNew       string
	minus, plus          string
	minusNull, plusNull  bool
	haveMinus, havePlus  bool
	renameFrom, renameTo string
	copyTo               string
	newFile, deleted     bool
}

func (p *parser) inHunk() bool { return p.oldLeft > 0 || p.newLeft > 0 }

// malformed records the first problem of the input.
func (p *parser) malformed(what string) {
	if p.err == nil {
		p.err = fmt.Errorf("line %d: %s: %w", p.lineNo, what, ErrMalformed)
	}
}

// line handles one input line (without its newline).
func (p *parser) line(s string) {
	if p.inHunk() {
		if p.body(s) {
			return
		}
		p.malformed("hunk shorter than its header")
		p.oldLeft, p.newLeft = 0, 0
	}
	switch {
	case strings.HasPrefix(s, "diff --git "):
		p.startFile()
		if a, b, ok := gitLinePaths(s[len("diff --git "):]); ok {
			p.hdr.gitOld, p.hdr.gitNew = a, b
		}
	case strings.HasPrefix(s, "@@ "):
		p.startHunk(s)
	case strings.HasPrefix(s, `\`):
		p.noNewline()
	case strings.HasPrefix(s, "--- "):
		// A second "---" in one file, or one outside any file, starts a
		// file of a plain unified diff (no "diff --git" line).
		if p.cur == nil || p.hdr.haveMinus {
			p.startFile()
		}
		path, null, ok := headerPath(s[4:], "a/")
		if !ok {
			p.malformed("bad --- path")
		}
		p.hdr.minus, p.hdr.minusNull, p.hdr.haveMinus = path, null, ok
	case p.cur == nil:
		// Text before the first file (a commit message, say): ignored.
	case strings.HasPrefix(s, "+++ "):
		path, null, ok := headerPath(s[4:], "b/")
		if !ok {
			p.malformed("bad +++ path")
		}
		p.hdr.plus, p.hdr.plusNull, p.hdr.havePlus = path, null, ok
	case strings.HasPrefix(s, "new file mode "):
		p.hdr.newFile = true
		p.cur.NewMode = s[len("new file mode "):]
	case strings.HasPrefix(s, "deleted file mode "):
		p.hdr.deleted = true
		p.cur.OldMode = s[len("deleted file mode "):]
	case strings.HasPrefix(s, "old mode "):
		p.cur.OldMode = s[len("old mode "):]
	case strings.HasPrefix(s, "new mode "):
		p.cur.NewMode = s[len("new mode "):]
	case strings.HasPrefix(s, "rename from "):
		p.hdr.renameFrom = p.namedPath(s[len("rename from "):])
	case strings.HasPrefix(s, "rename to "):
		p.hdr.renameTo = p.namedPath(s[len("rename to "):])
	case strings.HasPrefix(s, "copy to "):
		p.hdr.copyTo = p.namedPath(s[len("copy to "):])
	case strings.HasPrefix(s, "Binary files "), s == "GIT binary patch":
		p.cur.Binary = true
	default:
		// index, similarity, copy from, GIT binary patch data, and any
		// header a later git adds: nothing the review shape needs.
	}
}

// namedPath decodes the path of a rename/copy line, noting a bad one.
func (p *parser) namedPath(s string) string {
	v, ok := onePath(s)
	if !ok {
		p.malformed("bad rename or copy path")
	}
	return v
}

// startFile ends the current file and begins a new one.
func (p *parser) startFile() {
	p.finishFile()
	p.cur = &File{Hunks: []Hunk{}}
	p.hdr = fileHdr{}
	p.hunk = -1
	p.keep = len(p.res.Files) < p.lim.MaxFiles
	p.lastKept = false
}

// finishFile resolves the current file's path and status and keeps it.
func (p *parser) finishFile() {
	f, h := p.cur, &p.hdr
	if f == nil {
		return
	}
	p.cur = nil
	oldP, newP := h.gitOld, h.gitNew
	if h.haveMinus && !h.minusNull {
		oldP = h.minus
	}
	if h.havePlus && !h.plusNull {
		newP = h.plus
	}
	if h.renameFrom != "" {
		oldP = h.renameFrom
	}
	if h.renameTo != "" {
		newP = h.renameTo
	}
	if h.copyTo != "" {
		newP = h.copyTo
	}
	added := h.newFile || h.minusNull || h.copyTo != ""
	deleted := !added && (h.deleted || h.plusNull)
	switch {
	case added:
		f.Status = StatusAdded
		f.Path = newP
	case deleted:
		f.Status = StatusDeleted
		f.Path = oldP
	case h.renameFrom != "" && h.renameTo != "" && oldP != newP:
		f.Status = StatusRenamed
		f.Path, f.OldPath = newP, oldP
	default:
		f.Status = StatusModified
		f.Path = newP
	}
	if f.Path == "" {
		f.Path = oldP
	}
	p.res.FileCount++
	p.res.Additions += f.Additions
	p.res.Deletions += f.Deletions
	if f.Path == "" {
		p.malformed("file without a path")
		p.res.Truncated = true
		p.res.Bytes -= keptBytes(f) // the cap's room goes back to the files kept
		return
	}
	if !p.keep {
		p.res.Truncated = true
		return
	}
	p.res.Files = append(p.res.Files, *f)
}

// keptBytes is what f's kept text counted against the byte cap.
func keptBytes(f *File) int {
	n := 0
	for _, h := range f.Hunks {
		n += len(h.Header) + 1
		for _, l := range h.Lines {
			n += len(l.Text) + 1
		}
	}
	return n
}

// startHunk reads a hunk header and begins its body.
func (p *parser) startHunk(s string) {
	if p.cur == nil {
		p.malformed("hunk outside a file")
		p.startFile()
	}
	os, ol, ns, nl, ok := hunkHeader(s)
	if !ok {
		p.malformed("bad hunk header")
		p.hunk = -1
		return
	}
	p.oldLeft, p.newLeft = ol, nl
	p.oldNo, p.newNo = os, ns
	p.lastKept = false
	p.hunk = -1
	if !p.keep {
		return
	}
	if !p.take(len(s)) {
		p.cur.Truncated = true
		return
	}
	p.cur.Hunks = append(p.cur.Hunks, Hunk{
		Header: s, OldStart: os, OldLines: ol, NewStart: ns, NewLines: nl, Lines: []Line{},
	})
	p.hunk = len(p.cur.Hunks) - 1
}

// take reserves n bytes of text (plus one for its newline) under the cap;
// false, and from then on always false, once the cap would be passed.
func (p *parser) take(n int) bool {
	if p.full || p.res.Bytes+n+1 > p.lim.MaxBytes {
		p.full = true
		p.res.Truncated = true
		return false
	}
	p.res.Bytes += n + 1
	return true
}

// body handles one line inside a hunk; false when s cannot be part of it.
func (p *parser) body(s string) bool {
	var l Line
	switch {
	case s == "" || s[0] == ' ':
		// An empty line is an empty context line (diff.suppressBlankEmpty).
		if p.oldLeft == 0 || p.newLeft == 0 {
			return false
		}
		l = Line{Kind: KindCtx, OldNo: p.oldNo, NewNo: p.newNo}
		p.oldNo++
		p.newNo++
		p.oldLeft--
		p.newLeft--
	case s[0] == '-':
		if p.oldLeft == 0 {
			return false
		}
		l = Line{Kind: KindDel, OldNo: p.oldNo}
		p.oldNo++
		p.oldLeft--
		p.cur.Deletions++
	case s[0] == '+':
		if p.newLeft == 0 {
			return false
		}
		l = Line{Kind: KindAdd, NewNo: p.newNo}
		p.newNo++
		p.newLeft--
		p.cur.Additions++
	case s[0] == '\\':
		p.noNewline()
		return true
	default:
		return false
	}
	if s != "" {
		l.Text = s[1:]
	}
	p.lastKept = false
	if p.hunk < 0 {
		return true
	}
	if !p.take(len(l.Text)) {
		p.cur.Truncated = true
		p.hunk = -1
		return true
	}
	h := &p.cur.Hunks[p.hunk]
	h.Lines = append(h.Lines, l)
	p.lastKept = true
	return true
}

// noNewline marks the line just read, if kept, as lacking a newline.
func (p *parser) noNewline() {
	if p.cur == nil || !p.lastKept || p.hunk < 0 {
		return
	}
	ls := p.cur.Hunks[p.hunk].Lines
	ls[len(ls)-1].NoNewline = true
}

// hunkHeader parses "@@ -os[,ol] +ns[,nl] @@[ context]"; an omitted count
// is 1.
func hunkHeader(s string) (os, ol, ns, nl int, ok bool) {
	rest, found := strings.CutPrefix(s, "@@ -")
	if !found {
		return 0, 0, 0, 0, false
	}
	if os, ol, rest, ok = hunkRange(rest); !ok {
		return 0, 0, 0, 0, false
	}
	if rest, found = strings.CutPrefix(rest, " +"); !found {
		return 0, 0, 0, 0, false
	}
	if ns, nl, rest, ok = hunkRange(rest); !ok {
		return 0, 0, 0, 0, false
	}
	if rest != " @@" && !strings.HasPrefix(rest, " @@ ") {
		return 0, 0, 0, 0, false
	}
	return os, ol, ns, nl, true
}

// hunkRange parses "start[,count]" at the front of s.
func hunkRange(s string) (start, count int, rest string, ok bool) {
	start, rest, ok = number(s)
	if !ok {
		return 0, 0, s, false
	}
	count = 1
	if r, found := strings.CutPrefix(rest, ","); found {
		if count, rest, ok = number(r); !ok {
			return 0, 0, s, false
		}
	}
	return start, count, rest, true
}

// maxNumber bounds hunk numbers: far beyond any real file, and small
// enough that line arithmetic cannot overflow.
const maxNumber = 1 << 31

// number parses the decimal digits at the front of s.
func number(s string) (n int, rest string, ok bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 10 {
		return 0, s, false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n > maxNumber {
		return 0, s, false
	}
	return n, s[i:], true
}
