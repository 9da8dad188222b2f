package daemon_test

import (
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestTeamAgentAnswersAWorkersQuestion: team.decision.answer with
// by_agent_id records the agent that answered, in the decision (answer.by
// is its id, in the answer and in the team_decision_changed event) and in
// the feed item (agent_id); an agent that does not exist is NOT_FOUND, and
// the daemon itself refuses an agent a permission or merge decision
// (PERMISSION_DENIED), leaving it open for the person.
func TestTeamAgentAnswersAWorkersQuestion(t *testing.T) {
	repo := gitRepo(t)
	runGit(t, repo, "config", "user.name", "t")
	runGit(t, repo, "config", "user.email", "t@example.test")
	h := start(t, nil)
	c := h.dial()
	g := teamCall[protocol.TeamGoalData](t, c, &protocol.TeamGoalSubmit{Header: teamHdr(protocol.TypeTeamGoalSubmit), Text: "ask", Cwd: repo}).Goal
	lead := g.LeadAgentID
	if lead == "" {
		t.Fatalf("goal without a lead: %+v", g)
	}
	ts := teamCall[protocol.TeamTasksData](t, c, &protocol.TeamTaskCreate{Header: teamHdr(protocol.TypeTeamTaskCreate), GoalID: g.GoalID,
		ByAgentID: lead, Tasks: []protocol.TeamTaskSpec{
			{Title: "write", Prompt: writeTool("p.txt", "P")},
			{Title: "ask", Prompt: "sim: ask select Colour red blue"},
		}}).Tasks
	byAgent := func(id, agent, option string) error {
		_, err := c.Request(ctx(t), &protocol.TeamDecisionAnswer{Header: teamHdr(protocol.TypeTeamDecisionAnswer),
			DecisionID: id, Option: option, ByAgentID: agent})
		return err
	}

	perm := decisionOf(t, c, g.GoalID, protocol.DecisionKindPermission, ts[0].TaskID)
	if err := byAgent(perm.DecisionID, lead, protocol.OptionAllowOnce); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Fatalf("an agent answering a permission decision: %v, want PERMISSION_DENIED", err)
	}
	q := decisionOf(t, c, g.GoalID, protocol.DecisionKindQuestion, ts[1].TaskID)
	if err := byAgent(q.DecisionID, "agent-nobody", "blue"); protocol.CodeOf(err) != protocol.CodeNotFound {
		t.Fatalf("an answer by an agent that does not exist: %v, want NOT_FOUND", err)
	}
	long := strings.Repeat("a", protocol.MaxIDLen+1)
	if err := byAgent(q.DecisionID, long, "blue"); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
		t.Fatalf("an answer with a by_agent_id past its bound: %v, want INVALID_REQUEST", err)
	}
	for _, d := range teamCall[protocol.TeamGoalShowData](t, c, &protocol.TeamGoalShow{Header: teamHdr(protocol.TypeTeamGoalShow), GoalID: g.GoalID}).Decisions {
		if (d.DecisionID == perm.DecisionID || d.DecisionID == q.DecisionID) && d.State != protocol.DecisionOpen {
			t.Fatalf("a refused answer closed decision %+v", d)
		}
	}

	got := teamCall[protocol.TeamDecisionData](t, c, &protocol.TeamDecisionAnswer{Header: teamHdr(protocol.TypeTeamDecisionAnswer),
		DecisionID: q.DecisionID, Option: "blue", ByAgentID: lead}).Decision
	if got.State != protocol.DecisionAnswered || got.Answer == nil || got.Answer.Option != "blue" || got.Answer.By != lead {
		t.Fatalf("the lead's answer = %+v (answer %+v), want answered blue by %s", got, got.Answer, lead)
	}
	ev := waitTeam(t, c, protocol.TypeTeamDecisionChanged, func(e protocol.TeamDecisionChanged) bool {
		return e.Decision.DecisionID == q.DecisionID && e.Decision.State == protocol.DecisionAnswered
	}).Decision
	if ev.Answer == nil || ev.Answer.By != lead {
		t.Fatalf("the announced answer = %+v, want by %s", ev.Answer, lead)
	}
	feed := teamCall[protocol.TeamFeedData](t, c, &protocol.TeamFeed{Header: teamHdr(protocol.TypeTeamFeed), GoalID: g.GoalID, Limit: 200})
	answered := 0
	for _, it := range feed.Items {
		if it.Kind == protocol.FeedDecision && it.TaskID == ts[1].TaskID && strings.Contains(it.Text, "answered: blue") {
			answered++
			if it.AgentID != lead {
				t.Fatalf("the feed's answer item = %+v, want agent_id %s", it, lead)
			}
		}
	}
	if answered != 1 {
		t.Fatalf("%d feed items of the answer in %+v, want 1", answered, feed.Items)
	}

	// The person answers the permission; the asking worker goes on to
	// review, whose merge decision the lead may not take either.
	if a := answer(t, c, perm.DecisionID, protocol.OptionAllowOnce, ""); a.Answer == nil || a.Answer.By != "user" {
		t.Fatalf("the person's answer = %+v, want by user", a.Answer)
	}
	merge := mergeOf(t, c, g.GoalID, ts[1].TaskID)
	if err := byAgent(merge.DecisionID, lead, protocol.OptionMerge); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Fatalf("an agent answering a merge decision: %v, want PERMISSION_DENIED", err)
	}
	if d := decisionOf(t, c, g.GoalID, protocol.DecisionKindMerge, ts[1].TaskID); d.DecisionID != merge.DecisionID {
		t.Fatalf("the refused merge decision is no longer open: %+v", d)
	}
}
