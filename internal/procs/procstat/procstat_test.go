package procstat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// line is a stat line as the kernel writes it (52 fields), with st's
// values in their fields and filler elsewhere.
func line(st Stat) []byte {
	f := make([]string, 53) // f[n] is field n
	for n := range f {
		f[n] = strconv.Itoa(1000 + n)
	}
	f[1] = strconv.Itoa(st.PID)
	f[2] = "(" + st.Comm + ")"
	f[3] = string([]byte{st.State})
	f[4] = strconv.Itoa(st.PPID)
	f[5] = strconv.Itoa(st.PGRP)
	f[6] = strconv.Itoa(st.Session)
	f[14] = strconv.FormatUint(st.UTime, 10)
	f[15] = strconv.FormatUint(st.STime, 10)
	f[19] = strconv.Itoa(st.Nice)
	f[22] = strconv.FormatUint(st.StartTime, 10)
	f[41] = strconv.Itoa(st.Policy)
	return []byte(strings.Join(f[1:], " ") + "\n")
}

func TestParse(t *testing.T) {
	t.Parallel()
	base := Stat{PID: 4242, Comm: "shardd", State: 'S', PPID: 1, PGRP: 4242, Session: 4242,
		UTime: 17, STime: 3, Nice: -5, StartTime: 123456789, Policy: 5}
	with := func(comm string, state byte) Stat {
		st := base
		st.Comm, st.State = comm, state
		return st
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want Stat
	}{
		{"plain", line(base), base},
		{"spaces in the name", line(with("tmux: server", 'S')), with("tmux: server", 'S')},
		{"a name that looks like the fields after it", line(with("x) Z 1 2 (y", 'R')), with("x) Z 1 2 (y", 'R')},
		{"parentheses only", line(with(")(", 'D')), with(")(", 'D')},
		{"empty name", line(with("", 'Z')), with("", 'Z')},
		{"newline in the name", line(with("a\nb", 'X')), with("a\nb", 'X')},
		{"no trailing newline", []byte(strings.TrimSuffix(string(line(base)), "\n")), base},
		{"exactly 41 fields", []byte(strings.Join(strings.Fields(string(line(base)))[:41], " ")), base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("Parse(%q) =\n %+v, want\n %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	t.Parallel()
	good := string(line(Stat{PID: 7, Comm: "a b", State: 'S', PPID: 1, PGRP: 7, Session: 7}))
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"no name", "7 S 1 7 7"},
		{"no closing parenthesis", strings.Replace(good, ")", " ", 1)},
		{"closing before opening", ") 7 (a S 1"},
		{"too few fields", strings.Join(strings.Fields(good)[:40], " ")},
		{"two-letter state", strings.Replace(good, ") S ", ") SS ", 1)},
		{"pid not a number", "x" + good},
		{"ppid not a number", strings.Replace(good, ") S 1 ", ") S one ", 1)},
		{"negative start time", strings.Replace(good, " 0 1023 ", " -1 1023 ", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if st, err := Parse([]byte(tc.in)); !errors.Is(err, ErrMalformed) {
				t.Errorf("Parse(%q) = %+v, %v; want ErrMalformed", tc.in, st, err)
			}
		})
	}
}

// TestReadSelf reads the test's own stat file and checks it against what
// the kernel says through system calls.
func TestReadSelf(t *testing.T) {
	t.Parallel()
	st, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The state is the main thread's, which need not be the one reading:
	// running, sleeping, or in a disk wait on a loaded machine — alive.
	if st.PID != os.Getpid() || st.PPID != os.Getppid() || st.PGRP != syscall.Getpgrp() || !strings.ContainsRune("RSD", rune(st.State)) {
		t.Errorf("Read(self) = %+v; want pid %d, ppid %d, pgrp %d, state R, S or D", st, os.Getpid(), os.Getppid(), syscall.Getpgrp())
	}
	if st.StartTime == 0 || st.Exited() {
		t.Errorf("Read(self) = %+v; want a start time, not exited", st)
	}
	if _, err := Read(-1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(-1) = %v; want fs.ErrNotExist", err)
	}
}

func TestDescendsFrom(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	self, parent, child := os.Getpid(), os.Getppid(), cmd.Process.Pid
	for _, tc := range []struct {
		pid, ancestor int
		want          bool
	}{
		{self, self, true},
		{self, parent, true},
		{child, self, true},
		{child, parent, true},
		{self, 1, true},
		{parent, self, false},
		{self, child, false},
		{self, 0, false},
		{-1, self, false},
	} {
		if got := DescendsFrom(tc.pid, tc.ancestor); got != tc.want {
			t.Errorf("DescendsFrom(%d, %d) = %v, want %v (self %d, parent %d, child %d)", tc.pid, tc.ancestor, got, tc.want, self, parent, child)
		}
	}
}

// TestReadNameWithParentheses names a real thread so that its stat line
// carries a ")" and what looks like fields inside its command name.
func TestReadNameWithParentheses(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := syscall.Gettid()
	commPath := fmt.Sprintf("/proc/self/task/%d/comm", tid)
	old, err := os.ReadFile(commPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.WriteFile(commPath, old, 0); err != nil {
			t.Error(err)
		}
	}()
	const name = "a) Z 1 (b c"
	if err := os.WriteFile(commPath, []byte(name), 0); err != nil {
		t.Fatal(err)
	}
	st, err := ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != tid || st.Comm != name || st.State != 'R' || st.PPID != os.Getppid() {
		t.Errorf("stat of the renamed thread = %+v; want pid %d, comm %q, state R, ppid %d", st, tid, name, os.Getppid())
	}
}

// FuzzParse: Parse never panics; what it accepts it reads back the same
// from a line written from its answer; and any command name survives the
// round trip.
func FuzzParse(f *testing.F) {
	f.Add(line(Stat{PID: 1, Comm: "init", State: 'S', StartTime: 9}))
	f.Add(line(Stat{PID: 2, Comm: "x) Z 1 (y", State: 'Z', Nice: -20, Policy: 5}))
	f.Add([]byte("1 (a) S"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		if st, err := Parse(data); err == nil {
			again, err := Parse(line(st))
			if err != nil || again != st {
				t.Fatalf("Parse(%q) = %+v; its line reads back as %+v, %v", data, st, again, err)
			}
		}
		want := Stat{PID: 3, Comm: string(data), State: 'R', PPID: 2, PGRP: 3, StartTime: 77}
		if got, err := Parse(line(want)); err != nil || got != want {
			t.Fatalf("command name %q: Parse = %+v, %v; want %+v", data, got, err, want)
		}
	})
}
