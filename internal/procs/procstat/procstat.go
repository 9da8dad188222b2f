package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Stat is what a stat file says about a process (or, under
// /proc/<pid>/task, a thread). Field numbers are proc(5)'s, counted from 1.
type Stat struct {
	PID       int    // field 1
	Comm      string // field 2, without its parentheses
	State     byte   // field 3: 'R', 'S', 'D', 'Z', 'X', …
	PPID      int    // field 4
	PGRP      int    // field 5
	Session   int    // field 6
	UTime     uint64 // field 14, in clock ticks
	STime     uint64 // field 15, in clock ticks
	Nice      int    // field 19
	StartTime uint64 // field 22, in clock ticks since boot
	Policy    int    // field 41, SCHED_* (SCHED_IDLE is 5)
}

// Exited reports whether the process has ended and only its entry is left
// (a zombie waiting to be reaped, or one being torn down): it runs no
// more, whatever it holds.
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// DescendsFrom reports whether process pid is ancestor or one of its
// descendants, following the parents the stat files name. A process that
// is gone on the way, or an ancestor ≤ 0, says no.
func DescendsFrom(pid, ancestor int) bool {
	if ancestor <= 0 {
		return false
	}
	for range 128 { // process trees are shallow; this bounds a loop on a race
		if pid == ancestor {
			return true
		}
		if pid <= 1 {
			return false
		}
		st, err := Read(pid)
		if err != nil {
			return false
		}
		pid = st.PPID
	}
	return false
}

// Read reads and parses /proc/<pid>/stat. A process that is gone gives an
// error that satisfies errors.Is(err, fs.ErrNotExist).
func Read(pid int) (Stat, error) {
	return ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
}

// ReadFile reads and parses the stat file at path, such as
// /proc/self/stat or /proc/<pid>/task/<tid>/stat.
func ReadFile(path string) (Stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Stat{}, fmt.Errorf("procstat: %w", err)
	}
	st, err := Parse(b)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// fieldCount is the last field Parse reads (Policy).
const fieldCount = 41

// Parse parses one stat line. The command name is taken from the first
// '(' to the last ')': it may hold spaces and parentheses itself, while
// nothing after it can hold a ')'.
func Parse(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Stat{}, fmt.Errorf("%w: no (command name)", ErrMalformed)
	}
	// rest[0] is field 3.
	rest := bytes.Fields(b[closing+1:])
	if len(rest) < fieldCount-2 {
		return Stat{}, fmt.Errorf("%w: %d fields, want at least %d", ErrMalformed, len(rest)+2, fieldCount)
	}
	if len(rest[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: state %q", ErrMalformed, rest[0])
	}
	st := Stat{Comm: string(b[open+1 : closing]), State: rest[0][0]}
	p := parser{rest: rest}
	st.PID = p.int("pid", bytes.TrimSpace(b[:open]))
	st.PPID = p.int("ppid", p.field(4))
	st.PGRP = p.int("pgrp", p.field(5))
	st.Session = p.int("session", p.field(6))
	st.UTime = p.uint("utime", p.field(14))
	st.STime = p.uint("stime", p.field(15))
	st.Nice = p.int("nice", p.field(19))
	st.StartTime = p.uint("starttime", p.field(22))
	st.Policy = p.int("policy", p.field(41))
	if p.err != nil {
		return Stat{}, p.err
	}
	return st, nil
}

// parser converts fields and keeps the first error.
type parser struct {
	rest [][]byte // the fields from field 3 on
	err  error
}

// field is field n (n ≥ 3).
func (p *parser) field(n int) []byte { return p.rest[n-3] }

func (p *parser) int(name string, b []byte) int {
	v, err := strconv.Atoi(string(b))
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("%w: %s %q", ErrMalformed, name, b)
	}
	return v
}

func (p *parser) uint(name string, b []byte) uint64 {
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("%w: %s %q", ErrMalformed, name, b)
	}
	return v
}
