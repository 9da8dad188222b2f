package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/internal/ids"
	"github.com/shard-dev/shard/protocol"
)

// shardctl team: the team.* commands of docs/protocol.md §10.4 — give a team
// a goal, read its board, steer its tasks, answer its decisions, read and
// write its memory, read its feed, message it, and watch it live.
//
// Ids: tables show goal, task, decision and memory ids shortened to unique
// prefixes (as agent ids, names.go), -o wide whole; every command takes a
// whole id or a unique prefix of one (with or without its "goal-",
// "task-", … kind), resolved against the matching list. A prefix that
// matches nothing is passed on as given, so the daemon answers NOT_FOUND in
// its own words; one that matches several is an error listing them.

func newTeamCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "team",
		Aliases: []string{"teams"},
		Short:   "Give a team goals; read its board, answer its decisions, steer its tasks",
		Long: `A team works toward a goal a person gives it: a lead agent plans the goal as
tasks on a board, workers build each task in a workspace (git worktree) of
its own, and a person decides in one decisions queue — questions,
permissions, and a merge decision for each task that reaches review
(Merge, Request changes, Reject). The team's memory and feed are shared by
every client (the page, AgentCraft clients, shardctl).

Ids may be given whole or as any unique prefix (tables show them shortened;
-o wide shows them whole). A task's worker prompt is private and never
shown.`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(
		newTeamSubmitCommand(g),
		newTeamGoalsCommand(g),
		newTeamShowCommand(g),
		newTeamCancelCommand(g),
		newTeamTaskCommand(g),
		newTeamDecisionsCommand(g),
		newTeamAnswerCommand(g),
		newTeamMemoryCommand(g),
		newTeamFeedCommand(g),
		newTeamMessageCommand(g),
		newTeamWatchCommand(g),
	)
	return cmd
}

// teamHeader is the header of a team command of type typ.
func teamHeader(typ string) protocol.Header { return protocol.Header{Type: typ} }

// listGoals reads team.goal.list.
func listGoals(ctx context.Context, conn *client.Conn, openOnly bool) ([]protocol.TeamGoal, error) {
	var data protocol.TeamGoalListData
	if err := conn.Call(ctx, &protocol.TeamGoalList{Header: teamHeader(protocol.TypeTeamGoalList), OpenOnly: openOnly}, &data); err != nil {
		return nil, err
	}
	return data.Goals, nil
}

// showGoal reads team.goal.show.
func showGoal(ctx context.Context, conn *client.Conn, goalID string) (protocol.TeamGoalShowData, error) {
	var data protocol.TeamGoalShowData
	err := conn.Call(ctx, &protocol.TeamGoalShow{Header: teamHeader(protocol.TypeTeamGoalShow), GoalID: goalID}, &data)
	return data, err
}

// listDecisions reads team.decision.list.
func listDecisions(ctx context.Context, conn *client.Conn, goalID string, openOnly bool) ([]protocol.TeamDecision, error) {
	var data protocol.TeamDecisionListData
	q := &protocol.TeamDecisionList{Header: teamHeader(protocol.TypeTeamDecisionList), GoalID: goalID, OpenOnly: openOnly}
	if err := conn.Call(ctx, q, &data); err != nil {
		return nil, err
	}
	return data.Decisions, nil
}

// listMemory reads team.memory.list.
func listMemory(ctx context.Context, conn *client.Conn, scope string) ([]protocol.TeamMemoryEntry, error) {
	var data protocol.TeamMemoryListData
	if err := conn.Call(ctx, &protocol.TeamMemoryList{Header: teamHeader(protocol.TypeTeamMemoryList), Scope: scope}, &data); err != nil {
		return nil, err
	}
	return data.Entries, nil
}

// allTasks reads the boards of every goal (open ones only when openOnly):
// the daemon has no command that lists tasks across goals.
func allTasks(ctx context.Context, conn *client.Conn, openOnly bool) ([]protocol.TeamTask, error) {
	goals, err := listGoals(ctx, conn, openOnly)
	if err != nil {
		return nil, err
	}
	var out []protocol.TeamTask
	for _, gl := range goals {
		b, err := showGoal(ctx, conn, gl.GoalID)
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, b.Tasks...)
	}
	return out, nil
}

// matchTeamID resolves handle against the ids of one kind: a whole id is
// itself; otherwise the ids it prefixes (with or without "kind-"). None:
// the handle as given (the daemon answers NOT_FOUND); several: an error
// naming them.
func matchTeamID(kind, handle string, all []string) (string, error) {
	if slices.Contains(all, handle) {
		return handle, nil
	}
	var found []string
	for _, id := range all {
		if strings.HasPrefix(id, handle) || strings.HasPrefix(strings.TrimPrefix(id, kind+"-"), handle) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return handle, nil
	case 1:
		return found[0], nil
	}
	return "", failed(fmt.Errorf("%q names %d %ss; use a longer prefix: %s", handle, len(found), kind, strings.Join(found, ", ")))
}

// resolveTeamID turns a handle of kind (ids.Goal, ids.Task, ids.Decision,
// ids.Memory) into a whole id, listing that kind only when the handle is
// not a whole id already.
func resolveTeamID(ctx context.Context, conn *client.Conn, kind, handle string) (string, error) {
	if handle == "" || wholeID(handle, kind) {
		return handle, nil
	}
	var all []string
	switch kind {
	case ids.Goal:
		goals, err := listGoals(ctx, conn, false)
		if err != nil {
			return "", fmt.Errorf("resolve %q: %w", handle, err)
		}
		for _, gl := range goals {
			all = append(all, gl.GoalID)
		}
	case ids.Task:
		tasks, err := allTasks(ctx, conn, false)
		if err != nil {
			return "", fmt.Errorf("resolve %q: %w", handle, err)
		}
		for _, t := range tasks {
			all = append(all, t.TaskID)
		}
	case ids.Decision:
		ds, err := listDecisions(ctx, conn, "", false)
		if err != nil {
			return "", fmt.Errorf("resolve %q: %w", handle, err)
		}
		for _, d := range ds {
			all = append(all, d.DecisionID)
		}
	case ids.Memory:
		es, err := listMemory(ctx, conn, "")
		if err != nil {
			return "", fmt.Errorf("resolve %q: %w", handle, err)
		}
		for _, e := range es {
			all = append(all, e.MemoryID)
		}
	}
	return matchTeamID(kind, handle, all)
}

// teamIDs shortens the team ids a table shows, whole with -o wide.
type teamIDs struct {
	wide  bool
	short map[string]string
}

// newTeamIDs prepares the short forms of ids.
func newTeamIDs(wide bool, all []string) teamIDs {
	t := teamIDs{wide: wide}
	if !wide {
		t.short = shortIDs(all)
	}
	return t
}

// id renders an id ("-" for none).
func (t teamIDs) id(id string) string {
	if s, ok := t.short[id]; ok && s != "" {
		return s
	}
	return orDash(id)
}

// goalState colors a goal status: cyan moving, green done, red failed,
// dim cancelled.
func (p palette) goalState(s string) string {
	switch s {
	case protocol.GoalPlanning, protocol.GoalActive:
		return p.paint(sgrCyan, s)
	case protocol.GoalDone:
		return p.paint(sgrGreen, s)
	case protocol.GoalFailed:
		return p.paint(sgrRed, s)
	}
	return p.paint(sgrDim, orDash(s))
}

// taskLabel is label in the color of task state s.
func (p palette) taskLabel(s, label string) string {
	switch s {
	case protocol.TaskDoing:
		return p.paint(sgrCyan, label)
	case protocol.TaskReview:
		return p.paint(sgrYellow, label)
	case protocol.TaskDone:
		return p.paint(sgrGreen, label)
	case protocol.TaskBlocked:
		return p.paint(sgrRed, label)
	case protocol.TaskTodo:
		return p.paint(sgrBlue, label)
	}
	return p.paint(sgrDim, orDash(label))
}

// ciState colors a CI result.
func (p palette) ciState(s string) string {
	switch s {
	case protocol.CIPass:
		return p.paint(sgrGreen, s)
	case protocol.CIFail:
		return p.paint(sgrRed, s)
	case protocol.CIRunning:
		return p.paint(sgrCyan, s)
	}
	return orDash(s)
}

// percent renders a 0..1 fraction as a whole percentage.
func percent(f float64) string { return strconv.Itoa(int(f*100+0.5)) + "%" }

// usd renders dollars with cents, fractions of a cent as "<$0.01".
func usd(v float64) string {
	if v > 0 && v < 0.005 {
		return "<$0.01"
	}
	return fmt.Sprintf("$%.2f", v)
}

// goalCost renders what a goal spent, and its limit when it has one.
func goalCost(gl protocol.TeamGoal) string {
	if gl.CostLimitUSD == nil {
		return usd(gl.CostUSD)
	}
	return usd(gl.CostUSD) + "/" + usd(*gl.CostLimitUSD)
}

// diffStat renders a task's diff stat: "+12 −3, 2 files".
func diffStat(d *protocol.TeamDiffStats) string {
	if d == nil {
		return "-"
	}
	files := "files"
	if d.Files == 1 {
		files = "file"
	}
	return fmt.Sprintf("+%d −%d, %d %s", d.Additions, d.Deletions, d.Files, files)
}

// numberedOptions renders a decision's options as "answer" takes them:
// "1) Merge, 2) Request changes, 3) Reject"; "(free text)" for none.
func numberedOptions(opts []string) string {
	if len(opts) == 0 {
		return "(free text)"
	}
	parts := make([]string, len(opts))
	for i, o := range opts {
		parts[i] = fmt.Sprintf("%d) %s", i+1, o)
	}
	return strings.Join(parts, ", ")
}

// firstLine is s up to its first line break, for a table cell.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// humanBoard escapes the control characters of a board for people (see
// sanitize.go), keeping the line breaks of the texts printed on lines of
// their own: the goal's text and the decisions' questions and contexts.
func humanBoard(b *protocol.TeamGoalShowData) {
	text := safeText(b.Goal.Text)
	humanDecisions(b.Decisions)
	safeAll(&b.Goal)
	safeAll(&b.Tasks)
	b.Goal.Text = text
}

// humanDecisions is humanBoard for decisions.
func humanDecisions(ds []protocol.TeamDecision) {
	for i := range ds {
		d := &ds[i]
		q, c := safeText(d.Question), safeText(d.Context)
		safeAll(d)
		d.Question, d.Context = q, c
	}
}

// completeTeam completes ids of one kind for the first argument.
func completeTeam(g *globalOptions, kind string) completer {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return teamCandidates(cmd, g, kind), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeTeamFlag completes ids of one kind for a flag.
func completeTeamFlag(g *globalOptions, kind string) completer {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return teamCandidates(cmd, g, kind), cobra.ShellCompDirectiveNoFileComp
	}
}

// teamCandidates lists completions of one kind: open goals, open tasks'
// cards, open decisions, memory entries, each with what it is.
func teamCandidates(cmd *cobra.Command, g *globalOptions, kind string) []string {
	return askForCompletion(cmd, g, func(ctx context.Context, conn *client.Conn) []string {
		var out []string
		switch kind {
		case ids.Goal:
			goals, _ := listGoals(ctx, conn, false)
			for _, gl := range goals {
				out = append(out, gl.GoalID+"\t"+gl.Status+" "+truncate(firstLine(gl.Text), 40))
			}
		case ids.Task:
			tasks, _ := allTasks(ctx, conn, true)
			for _, t := range tasks {
				out = append(out, t.TaskID+"\t"+t.State+" "+truncate(t.Title, 40))
			}
		case ids.Decision:
			ds, _ := listDecisions(ctx, conn, "", true)
			for _, d := range ds {
				out = append(out, d.DecisionID+"\t"+d.Kind+" "+truncate(firstLine(d.Question), 40))
			}
		case ids.Memory:
			es, _ := listMemory(ctx, conn, "")
			for _, e := range es {
				out = append(out, e.MemoryID+"\t"+e.Scope+"/"+e.Key)
			}
		}
		return out
	})
}
