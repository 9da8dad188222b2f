// Package procs reads what Linux says about a process, so that the daemon
// can recognise its own children across a restart: a pid alone may have
// been reused; a pid plus its start time may not.
package procs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/shard-dev/shard/internal/procs/procstat"
)

// StartTime returns the start time of pid (field 22 of /proc/<pid>/stat,
// in clock ticks since boot).
func StartTime(pid int) (uint64, error) {
	st, err := procstat.Read(pid)
	if err != nil {
		return 0, fmt.Errorf("procs: start time of %d: %w", pid, err)
	}
	return st.StartTime, nil
}

// KillGroupIfSame sends SIGKILL to process group pgid when its leader pid
// still runs with the recorded start time, or when the leader is gone but
// the group still has members (the runtime died, its tool subprocesses did
// not). It reports whether it signalled anything.
func KillGroupIfSame(pid, pgid int, start uint64) bool {
	if pgid <= 1 {
		return false
	}
	if st, err := StartTime(pid); err == nil {
		if st != start {
			return false // the pid was reused by an unrelated process
		}
		return syscall.Kill(-pgid, syscall.SIGKILL) == nil
	}
	// Leader gone: a group with the same id can only be ours if no new
	// process took the pid, which is what a missing /proc entry tells.
	return syscall.Kill(-pgid, syscall.SIGKILL) == nil
}

// KillWithEnv sends SIGKILL to every process but the caller whose
// environment holds all of entries — each "NAME=value" exactly, or "NAME="
// for any value — and returns how many it signalled. It reaches what a
// process-group kill misses: a runtime's tool runs in a session (and group)
// of its own, and what the tool started outlives a runtime that dies, while
// every descendant of a runtime inherits its environment. Processes whose
// environment cannot be read (other users', zombies) are skipped. It looks
// again while it finds new ones (at most three passes), so a child forked
// during a pass is not missed.
//
// It reads the environment of every process on the machine; a Sweeper
// shares one such scan among the callers that ask at the same time.
func KillWithEnv(entries ...string) int {
	if len(entries) == 0 {
		return 0
	}
	return killWithEnv([][]string{entries})[0]
}

// killWithEnv is KillWithEnv for several sets of entries in one scan: a
// process is killed when its environment holds every entry of one set;
// the answer counts the processes killed for each set.
func killWithEnv(sets [][]string) []int {
	self := os.Getpid()
	counts := make([]int, len(sets))
	killed := map[int]bool{}
	buf := make([]byte, 16<<10)
	for range 3 {
		dir, err := os.ReadDir("/proc")
		if err != nil {
			break
		}
		found := false
		for _, e := range dir {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self || killed[pid] {
				continue
			}
			var env []byte
			env, buf, err = readProcFile("/proc/"+e.Name()+"/environ", buf)
			if err != nil {
				continue
			}
			for i, entries := range sets {
				if !hasEnv(env, entries) {
					continue
				}
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed[pid], found = true, true
					counts[i]++
				}
				break
			}
		}
		if !found {
			break
		}
	}
	return counts
}

// Sweeper runs KillWithEnv for concurrent callers in shared scans: a
// caller waits for the first scan that starts after it asked, and every
// caller queued by then is served by that one pass over /proc. Runtimes
// exit in bursts (a parallel job ending, a drain of a thousand agents at
// shutdown), and a scan per exit would cost the number of processes times
// the number of exits. The zero value is ready; no goroutine runs while
// nobody waits.
type Sweeper struct {
	mu      sync.Mutex
	pending []*sweep
	running bool
	// scan is the shared scan; nil is killWithEnv (tests replace it).
	scan func(sets [][]string) []int
}

// sweep is one caller's request.
type sweep struct {
	entries []string
	killed  int
	done    chan struct{}
}

// KillWithEnv is KillWithEnv, with the scan shared (see Sweeper).
func (s *Sweeper) KillWithEnv(entries ...string) int {
	if len(entries) == 0 {
		return 0
	}
	r := &sweep{entries: entries, done: make(chan struct{})}
	s.mu.Lock()
	s.pending = append(s.pending, r)
	if !s.running {
		s.running = true
		go s.loop()
	}
	s.mu.Unlock()
	<-r.done
	return r.killed
}

// loop scans for the queued callers until none is left.
func (s *Sweeper) loop() {
	for {
		s.mu.Lock()
		batch := s.pending
		s.pending = nil
		if len(batch) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		sets := make([][]string, len(batch))
		for i, r := range batch {
			sets[i] = r.entries
		}
		scan := s.scan
		if scan == nil {
			scan = killWithEnv
		}
		for i, n := range scan(sets) {
			batch[i].killed = n
			close(batch[i].done)
		}
	}
}

// readProcFile reads a /proc file whole into buf (grown when it is too
// small, and returned for the next call) with bare open/read/close: no
// fstat and no poller registration, which os.ReadFile pays for every
// file. A sweep reads one environ per process on the machine at every
// runtime exit, so this is most of its cost (about a third of
// os.ReadFile's).
func readProcFile(path string, buf []byte) ([]byte, []byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, buf, err
	}
	defer syscall.Close(fd)
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, buf, err
		}
		if m == 0 {
			return buf[:n], buf, nil
		}
		n += m
	}
}

// hasEnv reports whether the NUL-separated environment env holds every
// entry (see KillWithEnv).
func hasEnv(env []byte, entries []string) bool {
	for _, want := range entries {
		prefix := strings.HasSuffix(want, "=")
		found := false
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if prefix && bytes.HasPrefix(kv, []byte(want)) || !prefix && string(kv) == want {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
