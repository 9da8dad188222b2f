package wire

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// vector is one JSON example the dialect gives (one per message type,
// docs/agentcraft.md §4 and §5), copied verbatim into testdata/<type>.json.
type vector struct {
	file   string
	client bool // a Mod -> Foreman message, decoded with DecodeClient
	want   any  // the Go type it must decode into
}

// vectors is every example the dialect gives: 15 server messages and 8
// client messages, one each.
var vectors = []vector{
	{"snapshot.json", false, Snapshot{}},
	{"agent.upsert.json", false, AgentUpsert{}},
	{"agent.log.json", false, AgentLog{}},
	{"agent.say.json", false, AgentSay{}},
	{"task.upsert.json", false, TaskUpsert{}},
	{"decision.upsert.json", false, DecisionUpsert{}},
	{"repo.upsert.json", false, RepoUpsert{}},
	{"memory.upsert.json", false, MemoryUpsert{}},
	{"goal.upsert.json", false, GoalUpsert{}},
	{"feed.add.json", false, FeedAdd{}},
	{"diff.json", false, Diff{}},
	{"notify.json", false, Notify{}},
	{"foreman.status.json", false, ForemanStatusMsg{}},
	{"ack.json", false, Ack{}},
	{"error.json", false, Error{}},
	{"hello.json", true, Hello{}},
	{"goal.submit.json", true, GoalSubmit{}},
	{"user.message.json", true, UserMessage{}},
	{"decision.answer.json", true, DecisionAnswerMsg{}},
	{"task.action.json", true, TaskActionMsg{}},
	{"agent.action.json", true, AgentActionMsg{}},
	{"diff.request.json", true, DiffRequest{}},
	{"repo.add.json", true, RepoAdd{}},
}

// jsonValue decodes b into a generic value, for comparing two encodings
// as JSON values (field order and spacing aside, presence included).
func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// TestVectors decodes every example with the decoder of its direction into
// its type, re-encodes it and compares the two as JSON values: a field the
// types drop, rename, add or fill with null fails here.
func TestVectors(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", v.file))
			if err != nil {
				t.Fatal(err)
			}
			var msg interface {
				json.Marshaler
				MessageType() Type
			}
			if v.client {
				m, err := DecodeClient(data)
				if err != nil {
					t.Fatalf("DecodeClient: %v", err)
				}
				msg = m
			} else {
				m, err := DecodeServer(data)
				if err != nil {
					t.Fatalf("DecodeServer: %v", err)
				}
				msg = m
				if _, err := DecodeClient(data); CodeOf(err) != CodeUnknownType {
					t.Errorf("DecodeClient of a server message: err %v, want %s", err, CodeUnknownType)
				}
			}
			if got, want := reflect.TypeOf(msg), reflect.TypeOf(v.want); got != want {
				t.Fatalf("decoded into %v, want %v", got, want)
			}
			if got, want := string(msg.MessageType()), strings.TrimSuffix(v.file, ".json"); got != want {
				t.Errorf("MessageType %q, want %q", got, want)
			}
			var out []byte
			if sm, ok := msg.(ServerMessage); ok {
				out, err = Encode(sm)
			} else {
				out, err = json.Marshal(msg)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := jsonValue(t, out), jsonValue(t, data); !reflect.DeepEqual(got, want) {
				t.Errorf("re-encoded differs from the vector\n got: %s\nwant: %s", out, data)
			}
		})
	}
}

// TestVectorsAllListed fails when a vector file is added to testdata
// without a line in vectors, or a line names a file that is not there.
func TestVectorsAllListed(t *testing.T) {
	listed := map[string]bool{}
	for _, v := range vectors {
		if listed[v.file] {
			t.Errorf("%s listed twice", v.file)
		}
		listed[v.file] = true
	}
	found := map[string]bool{}
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "fuzz" { // go test's corpus, not vectors
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel("testdata", path)
		found[rel] = true
		if !listed[rel] {
			t.Errorf("testdata/%s is not in the vectors table", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range listed {
		if !found[f] {
			t.Errorf("vectors lists %s, which testdata does not hold", f)
		}
	}
	if len(vectors) != 23 { // the dialect has 23 examples, one per message
		t.Errorf("%d vectors, want 23", len(vectors))
	}
}

// TestVectorValues spot-checks that fields land where they belong, beyond
// the round trip: pointers, the option union, nested lists.
func TestVectorValues(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	m, err := DecodeServer(read("snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := m.(Snapshot)
	if s.Foreman.CostUSD == nil || *s.Foreman.CostUSD != 0.42 || s.Foreman.Speed != nil || s.Foreman.Showcase != nil {
		t.Errorf("foreman = %+v", s.Foreman)
	}
	if s.Goal == nil || s.Goal.Progress != 0.39 || s.Agents[0].State != StateEditing || s.Repos[0].Worktrees[0].Additions != 45 {
		t.Errorf("snapshot = %+v", s)
	}
	if got := s.Decisions[0].Options; !reflect.DeepEqual(got, MergeOptions()) {
		t.Errorf("merge decision options %q, want MergeOptions()", got)
	}
	m, err = DecodeServer(read("diff.json"))
	if err != nil {
		t.Fatal(err)
	}
	line := m.(Diff).Files[1].Hunks[0].Lines[1]
	if line.Kind != LineDel || line.OldNo == nil || *line.OldNo != 10 || line.NewNo != nil {
		t.Errorf("del line = %+v", line)
	}
	c, err := DecodeClient(read("decision.answer.json"))
	if err != nil {
		t.Fatal(err)
	}
	da := c.(DecisionAnswerMsg)
	if da.Option == nil || da.Option.IsIndex || da.Option.Label != OptionRequestChanges || da.CorrelationID() != "c14" {
		t.Errorf("decision.answer = %+v", da)
	}
}
