//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// teamConn is a client whose events the test reads (team_* events).
func teamConn(t *testing.T, d *daemon) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func teamShow(t *testing.T, c *client.Conn, goalID string) protocol.TeamGoalShowData {
	t.Helper()
	var show protocol.TeamGoalShowData
	call(t, c, &protocol.TeamGoalShow{Header: protocol.Header{Type: protocol.TypeTeamGoalShow}, GoalID: goalID}, &show)
	return show
}

// awaitBoard reads the goal's board, then each team_* event after it,
// until cond holds of the board (the board is read again after each
// event, so an event that went by before is not missed).
func awaitBoard(t *testing.T, c *client.Conn, goalID, what string, cond func(protocol.TeamGoalShowData) bool) protocol.TeamGoalShowData {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		if show := teamShow(t, c, goalID); cond(show) {
			return show
		}
		select {
		case _, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection closed waiting for %s", what)
			}
		case <-timeout.C:
			t.Fatalf("timed out waiting for %s: %+v", what, teamShow(t, c, goalID))
		}
	}
}

func openOf(show protocol.TeamGoalShowData, kind, taskID string) (protocol.TeamDecision, bool) {
	for _, d := range show.Decisions {
		if d.Kind == kind && d.TaskID == taskID && d.State == protocol.DecisionOpen {
			return d, true
		}
	}
	return protocol.TeamDecision{}, false
}

func teamAnswer(t *testing.T, c *client.Conn, id, option string) protocol.TeamDecision {
	t.Helper()
	var data protocol.TeamDecisionData
	call(t, c, &protocol.TeamDecisionAnswer{Header: protocol.Header{Type: protocol.TypeTeamDecisionAnswer}, DecisionID: id, Option: option}, &data)
	return data.Decision
}

// TestTeamBoardSurvivesSIGKILL: shardd killed with SIGKILL while one
// worker runs and another task waits in review comes back with the board
// intact: the task in review keeps its open merge decision and merges; the
// task whose run the kill cut short is blocked "interrupted by a daemon
// restart", never rerun by itself; cancelling it ends the goal done.
func TestTeamBoardSurvivesSIGKILL(t *testing.T) {
	repo := wsRepo(t)
	home := newHome(t)
	d := startDaemonAt(t, home)
	c := teamConn(t, d)
	var sub protocol.TeamGoalData
	call(t, c, &protocol.TeamGoalSubmit{Header: protocol.Header{Type: protocol.TypeTeamGoalSubmit}, Text: "two tasks", Cwd: repo}, &sub)
	g := sub.Goal
	var made protocol.TeamTasksData
	call(t, c, &protocol.TeamTaskCreate{Header: protocol.Header{Type: protocol.TypeTeamTaskCreate}, GoalID: g.GoalID, Tasks: []protocol.TeamTaskSpec{
		{Title: "quick", Prompt: `sim: tool write {"path":"q.txt","content":"Q"}`},
		{Title: "slow", Prompt: "sim: sleep 60000"},
	}}, &made)
	quick, slow := made.Tasks[0].TaskID, made.Tasks[1].TaskID

	show := awaitBoard(t, c, g.GoalID, "the quick worker's permission", func(s protocol.TeamGoalShowData) bool {
		_, ok := openOf(s, protocol.DecisionKindPermission, quick)
		return ok
	})
	perm, _ := openOf(show, protocol.DecisionKindPermission, quick)
	teamAnswer(t, c, perm.DecisionID, protocol.OptionAllowOnce)
	before := awaitBoard(t, c, g.GoalID, "quick in review and slow doing", func(s protocol.TeamGoalShowData) bool {
		_, ok := openOf(s, protocol.DecisionKindMerge, quick)
		return ok && s.Tasks[1].State == protocol.TaskDoing
	})
	merge, _ := openOf(before, protocol.DecisionKindMerge, quick)

	if err := syscall.Kill(d.pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, 10*time.Second)

	d2 := startDaemonAt(t, home)
	c2 := teamConn(t, d2)
	after := awaitBoard(t, c2, g.GoalID, "the interrupted task blocked", func(s protocol.TeamGoalShowData) bool {
		return s.Tasks[1].State == protocol.TaskBlocked
	})
	if r := after.Tasks[1].BlockedReason; r != "interrupted by a daemon restart" {
		t.Fatalf("slow after the kill = %+v", after.Tasks[1])
	}
	if q := after.Tasks[0]; q.State != protocol.TaskReview || q.Branch != before.Tasks[0].Branch || q.WorkspaceID != before.Tasks[0].WorkspaceID {
		t.Fatalf("quick after the kill = %+v, before %+v", q, before.Tasks[0])
	}
	if d, ok := openOf(after, protocol.DecisionKindMerge, quick); !ok || d.DecisionID != merge.DecisionID {
		t.Fatalf("quick's merge decision after the kill = %+v (%v), want %s open", d, ok, merge.DecisionID)
	}
	if after.Goal.Status != protocol.GoalActive || after.Goal.LeadAgentID != g.LeadAgentID {
		t.Fatalf("goal after the kill = %+v", after.Goal)
	}
	if pids := runtimePIDs(t, before.Tasks[1].Assignee); len(pids) != 0 {
		t.Fatalf("the interrupted worker runs again: %v", pids)
	}

	if m := teamAnswer(t, c2, merge.DecisionID, protocol.OptionMerge); m.State != protocol.DecisionAnswered {
		t.Fatalf("merge = %+v", m)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "q.txt")); err != nil || string(b) != "Q" {
		t.Fatalf("main checkout q.txt = %q, %v", b, err)
	}
	var task protocol.TeamTaskData
	call(t, c2, &protocol.TeamTaskAction{Header: protocol.Header{Type: protocol.TypeTeamTaskAction}, TaskID: slow, Action: protocol.TaskActionCancel}, &task)
	done := awaitBoard(t, c2, g.GoalID, "the goal done", func(s protocol.TeamGoalShowData) bool { return s.Goal.Status == protocol.GoalDone })
	raw, _ := json.Marshal(done)
	if done.Goal.Progress != 1 {
		t.Fatalf("goal = %s", raw)
	}
}
