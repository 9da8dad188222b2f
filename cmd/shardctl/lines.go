package main

// Lines of user input, read in a goroutine: prompt's answers and a plain
// attach's prompts and answers.

import (
	"bufio"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// lineResult is one line of user input; eof marks the end of input (line
// then holds any final unterminated text).
type lineResult struct {
	line string
	eof  bool
}

// lineReader reads stdin lines in a goroutine, started on first use, so
// that waiting for an answer never blocks event handling.
type lineReader struct {
	r    io.Reader
	once sync.Once
	ch   chan lineResult
	quit chan struct{}
	// echo: input is not a terminal, so answers are echoed to keep the
	// transcript on stderr readable.
	echo bool
}

func newLineReader(r io.Reader) *lineReader {
	f, ok := r.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	return &lineReader{r: r, ch: make(chan lineResult), quit: make(chan struct{}), echo: !tty}
}

// C returns the channel of lines. After end of input it yields eof results
// forever, so every later question is answered by its default.
func (l *lineReader) C() <-chan lineResult {
	l.once.Do(func() { go l.read() })
	return l.ch
}

func (l *lineReader) read() {
	br := bufio.NewReader(l.r)
	for {
		line, err := br.ReadString('\n')
		res := lineResult{line: strings.TrimRight(line, "\r\n"), eof: err != nil}
		select {
		case l.ch <- res:
		case <-l.quit:
			return
		}
		if err != nil {
			for {
				select {
				case l.ch <- lineResult{eof: true}:
				case <-l.quit:
					return
				}
			}
		}
	}
}

// stop ends the goroutine once its current read returns (a read blocked on
// a terminal ends with the process).
func (l *lineReader) stop() { close(l.quit) }
