//go:build linux

package faults

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/procs/procstat"
	"github.com/shard-dev/shard/protocol"
)

// Turns that keep a runtime busy until it is killed: a long provider call,
// and a tool whose command outlives the shell (in a session of its own).
const (
	longTurn = "sim: sleep 600000"
	toolTurn = `sim: tool bash {"command":"sleep 600; true"}`
)

// TestRuntimeCrashes SIGKILLs runtime children at random moments while
// direct agents have turns in flight (some in a bash tool) and subagent runs
// are active. Each crash must reach every client as
// agent_exited{runtime_state: failed} (and an error event to attachments);
// a crashed run ends failed with the exit in its error; a prompt after the
// crash starts a new generation; nothing the dead runtime started survives
// it (its tool's subprocesses included); the daemon reaps every child (no
// zombie, no stray) and counts each crash.
func TestRuntimeCrashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(seed(t)), 2))
	kills := 2 * *roundsFlag
	home := newHome(t)
	d := startDaemon(t, home, daemonOpts{flags: []string{"--shutdown.timeout", "2s", "--kill.abort-grace", "500ms", "--kill.term-grace", "500ms"}})
	ctl := d.dial()
	events := recordWith(ctl, allowAll(ctl)) // an interactive user who allows every tool

	// Direct agents with a long turn each.
	var direct []string
	turn := map[string]string{}
	for i := range 3 {
		id, _ := createAgent(t, ctl)
		attach(t, ctl, id)
		turn[id] = longTurn
		if i == 0 {
			turn[id] = toolTurn
		}
		prompt(t, ctl, id, turn[id])
		direct = append(direct, id)
	}
	// A parent with a parallel job of long runs.
	parent, _ := createAgent(t, ctl)
	attach(t, ctl, parent)
	newJob := func() protocol.SubagentCreateData {
		var job protocol.SubagentCreateData
		call(t, ctl, &protocol.SubagentCreate{Header: hdr(protocol.TypeSubagentCreate, ""), ParentAgentID: parent,
			Strategy: protocol.StrategyParallel, Tasks: []protocol.TaskSpec{{Name: "a", Task: longTurn}, {Name: "b", Task: toolTurn}}}, &job)
		return job
	}
	runs := map[string]string{} // child agent → its live run
	for _, r := range newJob().Runs {
		runs[r.AgentID] = r.RunID
	}

	isDirect := func(id string) bool {
		for _, x := range direct {
			if x == id {
				return true
			}
		}
		return false
	}
	var killed []procInfo
	for k := range kills {
		// Everything in flight is busy: direct turns streaming-or-sleeping,
		// runs active.
		var targets []string
		targets = append(targets, direct...)
		for child := range runs {
			targets = append(targets, child)
		}
		target := targets[rng.IntN(len(targets))]
		if !isDirect(target) {
			waitRun(t, ctl, parent, runs[target], func(s protocol.RunState) bool { return s == protocol.RunActive })
		}
		victim := runtimeOf(t, d, target)
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		family := procsWithEnv("SHARD_AGENT_ID=" + target) // the runtime and what it started
		mark := events.mark()
		t.Logf("kill %d: runtime %d of %s (%d processes)", k+1, victim.pid, target, len(family))
		if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed = append(killed, victim)

		ev := events.waitFrom(t, mark, callTimeout, "agent_exited for "+target, is(protocol.TypeAgentExited, target))
		if ex := ev.Msg.(*protocol.AgentExited); ex.RuntimeState != protocol.RuntimeFailed || !strings.Contains(ex.Reason, "killed") {
			t.Fatalf("agent_exited = %s, want runtime_state failed and the signal in the reason", ev.Raw)
		}
		eventually(t, callTimeout, "every process of the killed runtime gone", func() bool {
			for _, p := range family {
				if p.alive() {
					return false
				}
			}
			return true
		})
		if isDirect(target) {
			events.waitFrom(t, mark, callTimeout, "error event for "+target, is(protocol.TypeError, target))
			// The next prompt restarts the runtime: a new process, a new turn.
			prompt(t, ctl, target, turn[target])
			events.waitFrom(t, mark, callTimeout, "turn_start of the new generation of "+target, is(protocol.TypeTurnStart, target))
			continue
		}
		snap := waitRun(t, ctl, parent, runs[target], func(s protocol.RunState) bool { return s.Terminal() })
		if snap.State != protocol.RunFailed || !strings.Contains(snap.Error, "runtime exited") {
			t.Fatalf("run %s after its runtime was killed: state %s, error %q; want failed, runtime exited", snap.RunID, snap.State, snap.Error)
		}
		delete(runs, target)
		if len(runs) == 0 {
			for _, r := range newJob().Runs {
				runs[r.AgentID] = r.RunID
			}
		}
	}

	// Every killed runtime was reaped, and counted as a crash.
	eventually(t, callTimeout, "killed runtimes reaped (no zombies)", func() bool {
		for _, p := range killed {
			if st, err := procstat.Read(p.pid); err == nil && st.StartTime == p.start { // alive, or a zombie nobody waited for
				return false
			}
		}
		return true
	})
	if got := d.mustMetrics()[`shard_runtime_exits_total{reason="crash"}`]; got != float64(kills) {
		t.Errorf("runtime_exits_total{crash} = %v after %d kills", got, kills)
	}
	// One runtime per agent, all children of the daemon.
	for _, id := range append(append([]string(nil), direct...), parent) {
		n := 0
		for _, p := range procsWithEnv("SHARD_AGENT_ID=" + id) {
			if st, err := procstat.Read(p.pid); err == nil && st.PPID == d.pid() {
				n++
			}
		}
		if n > 1 {
			t.Errorf("agent %s has %d runtime processes", id, n)
		}
	}
	if s := d.strays(); len(s) > 0 {
		t.Fatalf("processes of the home outside the daemon:%s", describe(s))
	}

	// The daemon still serves: a crashed agent answers a fresh turn.
	call(t, ctl, &protocol.Abort{Header: hdr(protocol.TypeAbort, direct[0])}, nil)
	events.waitFor(t, callTimeout, "turn_end after abort", is(protocol.TypeTurnEnd, direct[0]))
	mark := events.mark()
	prompt(t, ctl, direct[0], "sim: say survived")
	events.waitFrom(t, mark, callTimeout, "a whole turn after the crashes", func(ev client.Event) bool {
		mc, ok := ev.Msg.(*protocol.MessageComplete)
		return ok && mc.AgentID == direct[0] && strings.Contains(messageText(mc.Message), "survived")
	})

	d.stop()
	eventually(t, callTimeout, "no process of the home after shutdown", func() bool { return len(procsWithEnv(d.homeEnv())) == 0 })
}

// waitRun polls a run until its state satisfies ok and returns its snapshot.
func waitRun(t *testing.T, c *client.Conn, parent, runID string, ok func(protocol.RunState) bool) protocol.RunSnapshot {
	t.Helper()
	var snap protocol.RunSnapshot
	eventually(t, 2*callTimeout, fmt.Sprintf("run %s to reach the expected state", runID), func() bool {
		zero := 0.0
		var w protocol.SubagentWaitData
		call(t, c, &protocol.SubagentWait{Header: hdr(protocol.TypeSubagentWait, ""), ParentAgentID: parent, Handles: []string{runID}, Timeout: &zero}, &w)
		if len(w.Runs) != 1 {
			t.Fatalf("subagent.wait %s: %d runs", runID, len(w.Runs))
		}
		snap = w.Runs[0]
		return ok(snap.State)
	})
	return snap
}

// runtimeOf waits for the runtime process of agentID: the daemon's child
// carrying its SHARD_AGENT_ID.
func runtimeOf(t *testing.T, d *daemon, agentID string) procInfo {
	t.Helper()
	var rt procInfo
	eventually(t, callTimeout, "runtime of "+agentID, func() bool {
		for _, p := range procsWithEnv("SHARD_AGENT_ID=" + agentID) {
			if st, err := procstat.Read(p.pid); err == nil && st.PPID == d.pid() {
				rt = p
				return true
			}
		}
		return false
	})
	return rt
}
