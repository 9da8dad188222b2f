package wire

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// serverZeros is one zero value of every server message, and clientZeros
// of every client message.
func serverZeros() []ServerMessage {
	return []ServerMessage{Snapshot{}, AgentUpsert{}, AgentLog{}, AgentSay{}, TaskUpsert{},
		DecisionUpsert{}, RepoUpsert{}, MemoryUpsert{}, GoalUpsert{}, FeedAdd{}, Diff{}, Notify{},
		ForemanStatusMsg{}, Ack{}, Error{}}
}

func clientZeros() []ClientMessage {
	return []ClientMessage{Hello{}, GoalSubmit{}, UserMessage{}, DecisionAnswerMsg{}, TaskActionMsg{},
		AgentActionMsg{}, DiffRequest{}, RepoAdd{}}
}

// requiredKeys lists the JSON names of t's fields without omitempty.
func requiredKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if !strings.Contains(opts, "omitempty") {
			keys = append(keys, name)
		}
	}
	return keys
}

// TestEncodeZeroShapes encodes the zero value of every message and checks
// its shape: v and type set, every required field present (lists as [],
// objects as objects), no optional field, and null nowhere.
func TestEncodeZeroShapes(t *testing.T) {
	var msgs []json.Marshaler
	for _, m := range serverZeros() {
		msgs = append(msgs, m)
	}
	for _, m := range clientZeros() {
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		typ := m.(interface{ MessageType() Type }).MessageType()
		if obj["v"] != 1.0 || obj["type"] != string(typ) {
			t.Errorf("%T: envelope %v %v", m, obj["v"], obj["type"])
		}
		want := append(requiredKeys(reflect.TypeOf(m)), "v", "type")
		var got []string
		for k := range obj {
			got = append(got, k)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%T: keys %v, want %v", m, got, want)
		}
		if path, ok := findNull(obj, ""); ok {
			t.Errorf("%T: null at %s in %s", m, path, b)
		}
	}
}

// TestEncodeEntityZeroShapes does the same for entities nested in a
// message, where required lists are also [] when nil.
func TestEncodeEntityZeroShapes(t *testing.T) {
	entities := []any{Agent{}, LogEntry{}, Task{}, Decision{}, DecisionAnswer{}, Repo{}, Worktree{},
		MemoryEntry{}, Goal{}, FeedItem{}, ForemanStatus{}, AgentLogs{}, DiffFile{}, DiffHunk{}, DiffLine{}, DiffStats{}}
	for _, e := range entities {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		want := requiredKeys(reflect.TypeOf(e))
		var got []string
		for k := range obj {
			got = append(got, k)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%T: keys %v, want %v", e, got, want)
		}
		if path, ok := findNull(obj, ""); ok {
			t.Errorf("%T: null at %s in %s", e, path, b)
		}
	}
}

// TestEncodeOptionalZeros checks the optional fields whose zero value
// means something: they are sent when set, even to 0 or false.
func TestEncodeOptionalZeros(t *testing.T) {
	zero, no, line := 0.0, false, 0
	st := ForemanStatusMsg{Status: ForemanStatus{Version: "1", Backend: BackendSim, Auth: AuthOK,
		Speed: &zero, Showcase: &no, CostUSD: &zero}}
	b, err := Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, []string{string(b)}, []string{
		`{"v":1,"type":"foreman.status","status":{"version":"1","backend":"sim","auth":"ok","speed":0,"showcase":false,"costUsd":0}}`})

	b, err = json.Marshal(DiffLine{Kind: LineDel, Text: "x", OldNo: &line})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, []string{string(b)}, []string{`{"kind":"del","text":"x","oldNo":0}`})

	b, err = Encode(Ack{Re: "c18", OK: true, Result: map[string]any{"repoId": "demo-app"}})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, []string{string(b)}, []string{`{"v":1,"type":"ack","re":"c18","ok":true,"result":{"repoId":"demo-app"}}`})

	b, err = json.Marshal(DecisionAnswerMsg{DecisionID: "d1", Option: IndexOption(2)})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, []string{string(b)}, []string{`{"v":1,"type":"decision.answer","decisionId":"d1","option":2}`})
}

// findNull returns the path of the first null in v.
func findNull(v any, path string) (string, bool) {
	switch x := v.(type) {
	case nil:
		return path, true
	case map[string]any:
		for k, e := range x {
			if p, ok := findNull(e, path+"."+k); ok {
				return p, true
			}
		}
	case []any:
		for _, e := range x {
			if p, ok := findNull(e, path+"[]"); ok {
				return p, true
			}
		}
	}
	return "", false
}

// TestEnums checks every enum against the values the dialect lists.
func TestEnums(t *testing.T) {
	cases := []struct {
		name   string
		values []Enum
		bad    Enum
	}{
		{"AgentState", []Enum{StateIdle, StateThinking, StateReading, StateEditing, StateRunning, StateTesting, StateWaitingUser, StateBlocked, StateDone, StateError}, AgentState("sleeping")},
		{"Station", []Enum{StationDesk, StationLibrary, StationTerminal, StationTestbench, StationMergestation, StationMeeting, StationLounge, StationUser}, Station("kitchen")},
		{"AgentRole", []Enum{RoleLead, RoleWorker}, AgentRole("boss")},
		{"TaskStatus", []Enum{TaskTodo, TaskDoing, TaskReview, TaskDone, TaskBlocked, TaskCancelled}, TaskStatus("wip")},
		{"CiStatus", []Enum{CiUnknown, CiRunning, CiPass, CiFail}, CiStatus("ok")},
		{"LogKind", []Enum{LogText, LogTool, LogResult, LogError, LogDiff}, LogKind("info")},
		{"DecisionKind", []Enum{DecisionQuestion, DecisionPermission, DecisionMerge}, DecisionKind("vote")},
		{"DecisionStatus", []Enum{DecisionOpen, DecisionAnswered, DecisionCancelled}, DecisionStatus("closed")},
		{"GoalStatus", []Enum{GoalPlanning, GoalActive, GoalDone, GoalFailed, GoalCancelled}, GoalStatus("paused")},
		{"FeedKind", []Enum{FeedGoal, FeedPlan, FeedTask, FeedMessage, FeedDecision, FeedMerge, FeedCi, FeedMemory, FeedSystem, FeedError, FeedUser}, FeedKind("agent")},
		{"NotifyLevel", []Enum{NotifyInfo, NotifyWarn, NotifyNeedUser}, NotifyLevel("error")},
		{"WorktreeStatus", []Enum{WorktreeActive, WorktreeMerged, WorktreeAbandoned}, WorktreeStatus("retired")},
		{"BackendName", []Enum{BackendSim, BackendClaude}, BackendName("openai")},
		{"AuthStatus", []Enum{AuthOK, AuthFailed, AuthUnknown, AuthChecking}, AuthStatus("expired")},
		{"DiffFileStatus", []Enum{FileAdded, FileModified, FileDeleted, FileRenamed}, DiffFileStatus("copied")},
		{"DiffLineKind", []Enum{LineAdd, LineDel, LineCtx}, DiffLineKind("context")},
		{"TaskAction", []Enum{TaskReassign, TaskCancel, TaskRetry, TaskPrioritize}, TaskAction("delete")},
		{"AgentAction", []Enum{AgentPause, AgentResume, AgentStop, AgentSpawn}, AgentAction("kill")},
	}
	for _, c := range cases {
		for _, v := range c.values {
			if !v.Valid() {
				t.Errorf("%s %v not valid", c.name, v)
			}
		}
		if c.bad.Valid() {
			t.Errorf("%s %v valid", c.name, c.bad)
		}
		if reflect.Zero(reflect.TypeOf(c.bad)).Interface().(Enum).Valid() {
			t.Errorf("%s: empty value valid", c.name)
		}
	}
}

// TestOptionLabels pins the exact labels and their order.
func TestOptionLabels(t *testing.T) {
	if got := MergeOptions(); !slices.Equal(got, []string{"Merge", "Request changes", "Reject"}) {
		t.Errorf("MergeOptions %q", got)
	}
	if got := PermissionOptions(); !slices.Equal(got, []string{"Allow once", "Always allow for this agent", "Deny"}) {
		t.Errorf("PermissionOptions %q", got)
	}
	if !strings.HasPrefix(AlwaysAllowCovers, `"`+OptionAlwaysAllow+`"`) {
		t.Errorf("AlwaysAllowCovers %q does not quote OptionAlwaysAllow", AlwaysAllowCovers)
	}
}
