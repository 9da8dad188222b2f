//go:build linux

package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/skills"
	"github.com/shard-dev/shard/store"
)

// fillerTask is a task text of 64 KiB that the sim answers with one word:
// lines that do not start with "sim:" are not directives.
var fillerTask = "sim: say filler\n" + strings.Repeat(strings.Repeat("x", 1023)+"\n", 64)

// TestDiskFull runs shardd into the end of its disk: RLIMIT_FSIZE on the
// running daemon pins shard.db at its current size, so the next commit that
// must grow the file fails (EFBIG, after SIGXFSZ, which must not kill the
// daemon). Then:
//
//   - creates that must persist (subagent.create, agent.create) and
//     subagent.stop answer INTERNAL_ERROR and leave nothing behind: no job,
//     no agent, no runtime;
//   - what needs no commit still works: listing, status, a prompt to a live
//     agent, a crashed runtime restored by the next prompt;
//   - after a crash in that state and a restart without the limit, the
//     store checks clean, holds exactly the acknowledged jobs, reconciles as
//     after any crash, no process of the old generation survives (even a
//     runtime whose start could not be recorded), and new work commits.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	flags := []string{"--jobs.max-active-per-parent", "1", "--shutdown.timeout", "2s"}
	d := startDaemon(t, home, daemonOpts{flags: flags})
	ctl := d.dial()
	events := record(ctl)
	parent, _ := createAgent(t, ctl)
	attach(t, ctl, parent)
	direct, _ := createAgent(t, ctl)
	attach(t, ctl, direct)

	acked := map[string]protocol.SubagentCreateData{}
	create := func(task string) (protocol.SubagentCreateData, error) {
		var data protocol.SubagentCreateData
		err := tryCall(ctl, &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate, ""), ParentAgentID: parent, Name: "w", Task: task}, &data)
		if err == nil {
			acked[data.JobID] = data
		}
		return data, err
	}
	// One long run holds the parent's only slot; the rest will queue.
	long, err := create(longTurn)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, ctl, parent, long.Runs[0].RunID, func(s protocol.RunState) bool { return s == protocol.RunActive })
	for range 8 {
		if _, err := create(fillerTask); err != nil {
			t.Fatal(err)
		}
	}

	// The disk is full: shard.db may not grow past its size.
	fi, err := os.Stat(d.dbPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := setFileSizeLimit(d.pid(), uint64(fi.Size())); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	t.Logf("shard.db pinned at %d KiB", fi.Size()>>10)
	agentsBefore := liveAgents(t, d)

	// Large creates fail first, then small ones: each must fail with
	// INTERNAL_ERROR, and the daemon must live on.
	for _, task := range []string{fillerTask, "sim: say small"} {
		failed := untilRefused(t, d, func() error { _, err := create(task); return err })
		t.Logf("subagent.create of %d bytes refused after %d acknowledged jobs: %v", len(task), len(acked), failed)
	}
	bigCwd, bigTools, bigSkills := bigManifest(t)
	var agents []string
	failed := untilRefused(t, d, func() error {
		var cr protocol.AgentCreateData
		// A large manifest, which the free pages left inside the file
		// cannot hold: the longest name, the most tools and skills a
		// client may send (protocol/limits.go; the daemon checks that they
		// exist, so the skills are made) and a deep cwd, some 9 KiB.
		err := tryCall(ctl, &protocol.AgentCreate{Header: hdr(protocol.TypeAgentCreate, ""), Cwd: bigCwd,
			Name: strings.Repeat("n", protocol.MaxNameLen), Tools: bigTools, Skills: bigSkills}, &cr)
		if err == nil {
			agents = append(agents, cr.AgentID)
		}
		return err
	})
	t.Logf("agent.create refused after %d more agents: %v", len(agents), failed)
	// The failure is the one induced: the file may not grow (EFBIG; the
	// SIGXFSZ that came with it was survived).
	if !strings.Contains(failed.Message, "file too large") {
		t.Errorf("agent.create failed with %q, want the file-size error (EFBIG) in it", failed.Message)
	}
	// No runtime started for what was refused.
	want := slices.Sorted(slices.Values(append(agentsBefore, agents...)))
	if after := liveAgents(t, d); !slices.Equal(after, want) {
		t.Fatalf("runtimes on a full disk: %v, want those of the agents before and created: %v", after, want)
	}
	// A stop persists its request before anything happens: refused, the
	// run goes on; accepted (there was room), it is cancelled. (Its
	// runtime may then stop: the check above comes first.)
	err = tryCall(ctl, &protocol.SubagentStop{Header: hdr(protocol.TypeSubagentStop, ""), ParentAgentID: parent, Handle: long.JobID}, nil)
	if pe := protoErr(err); err != nil && (pe == nil || pe.Code != protocol.CodeInternal) {
		t.Fatalf("subagent.stop on a full disk: %v, want success or INTERNAL_ERROR", err)
	}
	t.Logf("subagent.stop on a full disk: %v", err)

	// What needs no commit works: reads, a turn, a runtime restart.
	var list protocol.AgentListData
	call(t, ctl, &protocol.AgentList{Header: hdr(protocol.TypeAgentList, "")}, &list)
	var st protocol.DaemonStatusData
	call(t, ctl, &protocol.DaemonStatus{Header: hdr(protocol.TypeDaemonStatus, "")}, &st)
	mark := events.mark()
	prompt(t, ctl, direct, "sim: say still talking")
	events.waitFrom(t, mark, callTimeout, "a turn on a full disk", is(protocol.TypeTurnEnd, direct))
	rt := runtimeOf(t, d, direct)
	if err := syscall.Kill(rt.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	events.waitFrom(t, mark, callTimeout, "agent_exited", is(protocol.TypeAgentExited, direct))
	mark = events.mark()
	prompt(t, ctl, direct, "sim: say restarted")
	events.waitFrom(t, mark, callTimeout, "a turn of a runtime started on a full disk", is(protocol.TypeTurnEnd, direct))

	// Crash in that state, then restart with room to grow.
	before := slices.DeleteFunc(procsWithEnv(d.homeEnv()), func(p procInfo) bool { return p.pid == d.pid() })
	d.sigkill()
	onDisk := map[string]store.Job{}
	for _, j := range offlineJobs(t, home) {
		onDisk[j.JobID] = j
	}
	for id, job := range acked {
		checkAcked(t, 0, job, onDisk[id])
	}
	if len(onDisk) != len(acked) {
		t.Fatalf("%d jobs on disk, %d acknowledged: a refused create left a record", len(onDisk), len(acked))
	}
	d = startDaemon(t, home, daemonOpts{flags: flags})
	waitGone(t, "processes of the daemon that crashed on a full disk", before)
	if s := d.strays(); len(s) > 0 {
		t.Fatalf("processes of the home outside the new daemon:%s", describe(s))
	}
	checkReconciled(t, 0, d, onDisk)
	c := d.dial()
	record(c)
	var job protocol.SubagentCreateData
	call(t, c, &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate, ""), ParentAgentID: parent, Name: "w", Task: fillerTask}, &job)
	c.Close()
	d.stop()
	if st := doctor(t, home); st["store"] != "ok" || st["orphans"] != "ok" {
		t.Fatalf("shardctl doctor after the disk-full crash: store %s, orphans %s", st["store"], st["orphans"])
	}
}

// setFileSizeLimit sets RLIMIT_FSIZE of a running process (prlimit(2)).
func setFileSizeLimit(pid int, n uint64) error {
	lim := syscall.Rlimit{Cur: n, Max: n}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// liveAgents returns the sorted agent ids of d's runtime processes.
func liveAgents(t *testing.T, d *daemon) []string {
	t.Helper()
	var ids []string
	for _, p := range procsWithEnv(d.homeEnv()) {
		if st, err := procstat.Read(p.pid); err != nil || st.PPID != d.pid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if id, ok := strings.CutPrefix(kv, "SHARD_AGENT_ID="); ok {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// untilRefused calls op until it fails, at most 500 times, and returns the
// failure, which must be INTERNAL_ERROR with the daemon still alive.
// bigManifest makes a deep working directory holding the most skills a
// create may name, each with the longest name, and returns it with those
// names and the most tools a create may name.
func bigManifest(t *testing.T) (cwd string, tools, skillNames []string) {
	t.Helper()
	cwd = shortTemp(t)
	for range 14 { // some 3.6 KiB of path, room left for the skills' files
		cwd = filepath.Join(cwd, strings.Repeat("d", 255))
	}
	known := []string{"read", "ls", "grep", "find", "write", "edit", "bash"}
	for i := range protocol.MaxListLen {
		tools = append(tools, known[i%len(known)])
		name := fmt.Sprintf("%03d", i) + strings.Repeat("s", skills.MaxName-3)
		skillNames = append(skillNames, name)
		dir := filepath.Join(cwd, ".shard", "skills", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: "+name+"\ndescription: d\n---\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cwd, tools, skillNames
}

func untilRefused(t *testing.T, d *daemon, op func() error) *protocol.Error {
	t.Helper()
	for range 500 {
		err := op()
		if err == nil {
			continue
		}
		pe := protoErr(err)
		if pe == nil || d.exited() {
			t.Fatalf("on a full disk: %v; shardd exited: %v\nstderr:\n%s", err, d.State(), d.stderr.String())
		}
		if pe.Code != protocol.CodeInternal {
			t.Fatalf("on a full disk: %v, want INTERNAL_ERROR", pe)
		}
		return pe
	}
	t.Fatal("500 commits fitted in a file that may not grow")
	return nil
}
