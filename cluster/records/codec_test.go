package records

import (
	"errors"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// seeds are stored values each decoder must take apart: real encodings,
// then the near misses the decoder must refuse.
func seeds[T Record](valid T) [][]byte {
	raw, err := encode(&valid)
	if err != nil {
		panic(err)
	}
	return [][]byte{
		raw,
		[]byte(`{"v":2,"kind":"` + kindOf[T]() + `","data":{}}`),
		[]byte(`{"v":1,"kind":"` + kindOf[T]() + `","data":{},"x":1}`),
		[]byte(`{"v":1,"kind":"nope","data":{}}`),
		append(append([]byte{}, raw...), []byte(` {}`)...),
		[]byte(`null`),
		{},
		{0xff, 0xfe},
	}
}

func validAgent() AgentEntry {
	return AgentEntry{AgentID: "agent-1", Node: "n1", Cwd: "/w", State: AgentLive, CreatedAt: 1}
}
func validJob() JobRecord {
	return JobRecord{JobID: "job-1", ParentAgentID: "agent-1", ParentNode: "n1", Strategy: protocol.StrategyParallel, RunIDs: []string{"run-1"}}
}
func validRun() RunRecord {
	return RunRecord{RunID: "run-1", JobID: "job-1", AgentID: "agent-2", Task: "t", State: protocol.RunQueued, Anywhere: true}
}
func validAlias() AliasEntry {
	return AliasEntry{ParentAgentID: "agent-1", Alias: "scout", AgentID: "agent-2"}
}
func validClaim() ClaimEntry { return ClaimEntry{JobID: "job-1", RunID: "run-1", QueuedAt: 5} }

func TestCodecRoundTrip(t *testing.T) {
	roundTrip(t, validAgent())
	roundTrip(t, validJob())
	roundTrip(t, validRun())
	roundTrip(t, validAlias())
	roundTrip(t, validClaim())
}

func roundTrip[T Record](t *testing.T, v T) {
	t.Helper()
	raw, err := encode(&v)
	if err != nil {
		t.Fatalf("encode %s: %v", kindOf[T](), err)
	}
	if !strings.Contains(string(raw), `"v":1`) {
		t.Errorf("%s: no version in %s", kindOf[T](), raw)
	}
	got, err := decode[T](raw)
	if err != nil {
		t.Fatalf("decode %s: %v", kindOf[T](), err)
	}
	again, _ := encode(&got)
	if string(again) != string(raw) {
		t.Errorf("%s: round trip changed %s into %s", kindOf[T](), raw, again)
	}
}

// TestCodecRefuses shows each refusal wraps ErrDecode: every seed but the
// first (the valid encoding).
func TestCodecRefuses(t *testing.T) {
	for i, raw := range seeds(validRun())[1:] {
		if _, err := decode[RunRecord](raw); !errors.Is(err, ErrDecode) {
			t.Errorf("seed %d %q: err %v, want ErrDecode", i+1, raw, err)
		}
	}
	// A record of another kind in the wrong bucket.
	job := validJob()
	raw, _ := encode(&job)
	if _, err := decode[RunRecord](raw); !errors.Is(err, ErrDecode) {
		t.Errorf("job decoded as run: %v", err)
	}
	// A record that fails validation is refused both ways.
	bad := validRun()
	bad.Anywhere = false
	if _, err := encode(&bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("encode unplaced run: %v", err)
	}
}

func TestKeys(t *testing.T) {
	for _, k := range []string{"a", "job-1.run-2", "x_y=z"} {
		if !validKey(k) {
			t.Errorf("validKey(%q) = false", k)
		}
	}
	for _, k := range []string{"", ".", "a.", ".a", "a..b", "a b", "a.*", "a.>", "ä"} {
		if validKey(k) {
			t.Errorf("validKey(%q) = true", k)
		}
	}
	if k := AliasKey("agent-1", "my scout.v2"); !validKey(k) {
		t.Errorf("AliasKey gave invalid key %q", k)
	}
	if AliasKey("p", "a.b") == AliasKey("p.a", "b") {
		t.Error("alias keys collide")
	}
}

// fuzzDecoder checks a decoder never panics, and that whatever it accepts
// encodes again and decodes to the same record.
func fuzzDecoder[T Record](f *testing.F, valid T) {
	for _, s := range seeds(valid) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := decode[T](raw)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not wrap ErrDecode", err)
			}
			return
		}
		again, err := encode(&v)
		if err != nil {
			t.Fatalf("accepted record does not encode: %v", err)
		}
		w, err := decode[T](again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if a, b := mustEncode(&v), mustEncode(&w); a != b {
			t.Fatalf("round trip differs: %s vs %s", a, b)
		}
	})
}

func mustEncode[T Record](v *T) string {
	raw, err := encode(v)
	if err != nil {
		panic(err)
	}
	return string(raw)
}

func FuzzDecodeAgent(f *testing.F) { fuzzDecoder(f, validAgent()) }
func FuzzDecodeJob(f *testing.F)   { fuzzDecoder(f, validJob()) }
func FuzzDecodeRun(f *testing.F)   { fuzzDecoder(f, validRun()) }
func FuzzDecodeAlias(f *testing.F) { fuzzDecoder(f, validAlias()) }
func FuzzDecodeClaim(f *testing.F) { fuzzDecoder(f, validClaim()) }

// TestRunParentNode: a run carries its parent's node, and a run written
// before the field existed (no parent_node) still decodes, its parent's
// node left to the directory.
func TestRunParentNode(t *testing.T) {
	run := validRun()
	run.ParentNode = "n1"
	raw, err := encode(&run)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode[RunRecord](raw)
	if err != nil || got.ParentNode != "n1" {
		t.Fatalf("decode %s: %+v, %v (want parent_node n1)", raw, got, err)
	}
	old := []byte(`{"v":1,"kind":"run","data":{"run_id":"run-1","job_id":"job-1","index":0,"name":"","agent_id":"agent-2","task":"t","state":"queued","anywhere":true,"queued_at":0}}`)
	got, err = decode[RunRecord](old)
	if err != nil || got.ParentNode != "" {
		t.Fatalf("decode an older writer's run: %+v, %v (want it, without a parent node)", got, err)
	}
}
