package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/term"
)

// A screen is where attach writes and reads. The plain screen writes lines
// to stdout and reads lines from stdin; the terminal screen puts the
// terminal in raw mode and keeps an editable input line with a prompt at
// the bottom while output scrolls above it.
type screen interface {
	// text writes streamed model text, possibly part of a line.
	text(s string)
	// line writes one whole line, starting it on a fresh line.
	line(s string)
	// endText finishes streamed text with a newline if it left one open.
	endText()
	// setPrompt sets the input prompt (the terminal screen shows it; the
	// plain screen prints questions as lines instead).
	setPrompt(p string)
	// lines delivers the user's input lines; after the end of input it
	// yields eof results forever.
	lines() <-chan lineResult
	// interrupts delivers Ctrl-C presses (terminal screen only).
	interrupts() <-chan struct{}
	// echo reports whether answers should be echoed (input is not a
	// terminal, so the transcript would lack them).
	echo() bool
	pal() palette
	close()
}

// ---- plain lines ----

// plainScreen writes plain lines: for pipes, files and scripts.
type plainScreen struct {
	w       io.Writer
	in      *lineReader
	p       palette
	midLine bool
}

func newPlainScreen(stdin io.Reader, stdout io.Writer, p palette) *plainScreen {
	return &plainScreen{w: stdout, in: newLineReader(stdin), p: p}
}

func (s *plainScreen) text(t string) {
	if t == "" {
		return
	}
	io.WriteString(s.w, t)
	s.midLine = !strings.HasSuffix(t, "\n")
}

func (s *plainScreen) endText() {
	if s.midLine {
		io.WriteString(s.w, "\n")
		s.midLine = false
	}
}

func (s *plainScreen) line(l string) {
	s.endText()
	fmt.Fprintln(s.w, l)
}

func (s *plainScreen) setPrompt(string)            {}
func (s *plainScreen) lines() <-chan lineResult    { return s.in.C() }
func (s *plainScreen) interrupts() <-chan struct{} { return nil }
func (s *plainScreen) echo() bool                  { return s.in.echo }
func (s *plainScreen) pal() palette                { return s.p }
func (s *plainScreen) close()                      { s.in.stop() }

// ---- a real terminal ----

// ttyScreen drives a terminal through x/term's line editor: raw mode,
// history, and output that scrolls above the prompt line. Streamed text is
// word-wrapped here, so that the prompt drawn after it never wraps.
type ttyScreen struct {
	t       *term.Terminal
	fd      int
	restore *term.State
	p       palette

	in   chan lineResult
	intr chan struct{}
	quit chan struct{}

	// mu protects the following.
	mu     sync.Mutex
	prompt string
	width  int
	col    int    // column of the cursor in streamed text
	word   []rune // the streamed word not yet written
}

// newTTYScreen switches stdin to raw mode and shows prompt; close
// restores the terminal.
func newTTYScreen(stdin, stdout *os.File, p palette, prompt string) (*ttyScreen, error) {
	fd := int(stdin.Fd())
	st, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("terminal raw mode: %w", err)
	}
	s := &ttyScreen{fd: fd, restore: st, p: p, prompt: prompt,
		in: make(chan lineResult), intr: make(chan struct{}, 1), quit: make(chan struct{})}
	rw := struct {
		io.Reader
		io.Writer
	}{&ctrlCFilter{r: stdin, intr: s.intr}, stdout}
	s.t = term.NewTerminal(rw, prompt)
	s.resize(int(stdout.Fd()))
	go s.read()
	return s, nil
}

// resize takes the terminal's current size.
func (s *ttyScreen) resize(fd int) {
	w, h, err := term.GetSize(fd)
	if err != nil || w <= 0 {
		w, h = 80, 24
	}
	s.mu.Lock()
	s.width = w
	s.mu.Unlock()
	_ = s.t.SetSize(w, h)
}

// read feeds input lines to in. It blocks in a read of the terminal and
// ends with the process (a terminal read cannot be interrupted portably).
func (s *ttyScreen) read() {
	for {
		l, err := s.t.ReadLine()
		if err != nil && !errors.Is(err, term.ErrPasteIndicator) {
			for {
				select {
				case s.in <- lineResult{eof: true}:
				case <-s.quit:
					return
				}
			}
		}
		select {
		case s.in <- lineResult{line: l}:
		case <-s.quit:
			return
		}
	}
}

// limit is the widest streamed text may get: the prompt goes after it.
func (s *ttyScreen) limitLocked() int {
	return max(s.width-utf8.RuneCountInString(s.prompt)-1, 20)
}

func (s *ttyScreen) text(t string) {
	s.mu.Lock()
	var b strings.Builder
	limit := s.limitLocked()
	for _, r := range t {
		switch r {
		case '\n':
			s.flushWordLocked(&b, limit)
			b.WriteByte('\n')
			s.col = 0
		case ' ', '\t':
			s.flushWordLocked(&b, limit)
			if s.col+1 >= limit {
				b.WriteByte('\n')
				s.col = 0
			} else if s.col > 0 {
				b.WriteByte(' ')
				s.col++
			}
		case '\r':
		default:
			s.word = append(s.word, r)
			if len(s.word) >= limit {
				s.flushWordLocked(&b, limit)
			}
		}
	}
	s.mu.Unlock()
	if b.Len() > 0 {
		s.t.Write([]byte(b.String()))
	}
}

// flushWordLocked writes the pending word, on a new line if it would not
// fit on this one.
func (s *ttyScreen) flushWordLocked(b *strings.Builder, limit int) {
	if len(s.word) == 0 {
		return
	}
	if s.col > 0 && s.col+len(s.word) > limit {
		b.WriteByte('\n')
		s.col = 0
	}
	b.WriteString(string(s.word))
	s.col += len(s.word)
	s.word = s.word[:0]
}

func (s *ttyScreen) endText() {
	s.mu.Lock()
	var b strings.Builder
	s.flushWordLocked(&b, s.limitLocked())
	if s.col > 0 {
		b.WriteByte('\n')
		s.col = 0
	}
	s.mu.Unlock()
	if b.Len() > 0 {
		s.t.Write([]byte(b.String()))
	}
}

func (s *ttyScreen) line(l string) {
	s.endText()
	s.t.Write([]byte(l + "\n"))
}

func (s *ttyScreen) setPrompt(p string) {
	s.mu.Lock()
	changed := p != s.prompt
	s.prompt = p
	s.mu.Unlock()
	if changed {
		s.t.SetPrompt(p)
		// An empty write redraws the prompt line (unless nothing is
		// drawn yet, when the next read draws it).
		s.t.Write(nil)
	}
}

func (s *ttyScreen) lines() <-chan lineResult    { return s.in }
func (s *ttyScreen) interrupts() <-chan struct{} { return s.intr }
func (s *ttyScreen) echo() bool                  { return false }
func (s *ttyScreen) pal() palette                { return s.p }

func (s *ttyScreen) close() {
	s.endText()
	s.t.SetPrompt("")
	s.t.Write([]byte("\n"))
	close(s.quit)
	_ = term.Restore(s.fd, s.restore)
}

// ctrlCFilter takes Ctrl-C out of the terminal's input (x/term would read
// it as the end of input) and reports it on intr instead.
type ctrlCFilter struct {
	r    io.Reader
	intr chan struct{}
}

func (f *ctrlCFilter) Read(p []byte) (int, error) {
	for {
		n, err := f.r.Read(p)
		kept := p[:0]
		for _, c := range p[:n] {
			if c == 3 { // Ctrl-C
				select {
				case f.intr <- struct{}{}:
				default:
				}
				continue
			}
			kept = append(kept, c)
		}
		if len(kept) > 0 || err != nil {
			return len(kept), err
		}
	}
}
