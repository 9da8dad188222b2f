package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shard-dev/shard/protocol"
)

// TestClusterStatusDecode: cluster.status is an orchestrator command with
// no members; its data round-trips and is checked.
func TestClusterStatusDecode(t *testing.T) {
	t.Parallel()
	cmd, h, err := protocol.DecodeCommand([]byte(`{"id":"1","type":"cluster.status"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cmd.(*protocol.ClusterStatus); !ok || h.Type != protocol.TypeClusterStatus {
		t.Fatalf("decoded %T %+v", cmd, h)
	}
	if protocol.CommandScope(protocol.TypeClusterStatus) != protocol.ScopeOrchestrator {
		t.Fatal("cluster.status is not an orchestrator command")
	}

	// A single shardd's answer is exactly {"enabled":false}.
	if b := protocol.MustMarshal(protocol.ClusterStatusData{}); string(b) != `{"enabled":false}` {
		t.Fatalf("single shardd answer = %s", b)
	}
	good := protocol.ClusterStatusData{Enabled: true, Node: "n2", Nodes: []protocol.ClusterNode{
		{Node: "n1", Incarnation: 1, Health: protocol.NodeAlive, Capacity: 16, Socket: "/home/a/.shard-n1/daemon.sock", WebURL: "http://127.0.0.1:7421"},
		{Node: "n2", Incarnation: 2, Health: protocol.NodeSuspect, Self: true, Load: protocol.NodeLoad{Agents: 3, Runtimes: 1, Runs: 1}},
		{Node: "n3", Incarnation: 1, Health: protocol.NodeDead},
	}}
	b, _ := json.Marshal(good)
	got, err := protocol.DecodeClusterStatusData(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"load":{"agents":3,"runtimes":1,"runs":1}`) || !got.Nodes[1].Self ||
		!strings.Contains(string(b), `"socket":"/home/a/.shard-n1/daemon.sock","web_url":"http://127.0.0.1:7421"`) || got.Nodes[0] != good.Nodes[0] {
		t.Fatalf("round trip: %s → %+v", b, got)
	}
	for name, bad := range map[string]string{
		"unknown health":  `{"enabled":true,"node":"n1","nodes":[{"node":"n1","health":"sleepy"}]}`,
		"no node name":    `{"enabled":true,"node":"n1","nodes":[{"health":"alive"}]}`,
		"foreign self":    `{"enabled":true,"node":"n1","nodes":[{"node":"n2","health":"alive","self":true}]}`,
		"two selves":      `{"enabled":true,"node":"n1","nodes":[{"node":"n1","health":"alive","self":true},{"node":"n1","health":"dead","self":true}]}`,
		"negative":        `{"enabled":true,"node":"n1","nodes":[{"node":"n1","health":"alive","capacity":-1}]}`,
		"nodes when off":  `{"enabled":false,"nodes":[{"node":"n1","health":"alive"}]}`,
		"no answering":    `{"enabled":true}`,
		"not JSON":        `{"enabled":`,
		"relative socket": `{"enabled":true,"node":"n1","nodes":[{"node":"n1","health":"alive","socket":"daemon.sock"}]}`,
		"web not http":    `{"enabled":true,"node":"n1","nodes":[{"node":"n1","health":"alive","web_url":"file:///etc/passwd"}]}`,
	} {
		if _, err := protocol.DecodeClusterStatusData([]byte(bad)); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
			t.Errorf("%s: err = %v, want INVALID_REQUEST", name, err)
		}
	}
}

// FuzzClusterStatusData: whatever a node answers, the decoder either
// refuses it with INVALID_REQUEST or returns data that validates and
// re-encodes to data that decodes the same.
func FuzzClusterStatusData(f *testing.F) {
	f.Add([]byte(`{"enabled":false}`))
	f.Add([]byte(`{"enabled":true,"node":"n1","nodes":[{"node":"n1","incarnation":2,"health":"alive","started_at":1,"heartbeat_at":2,"load":{"agents":1,"runtimes":0,"runs":0},"capacity":16,"version":"dev","self":true}]}`))
	f.Add([]byte(`{"enabled":true,"node":"n1","nodes":[{"node":"n2","health":"dead","self":true}]}`))
	f.Add([]byte(`{"enabled":true,"node":"n1","nodes":[{"node":"n1","health":"alive","socket":"/s/daemon.sock","web_url":"http://127.0.0.1:1"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := protocol.DecodeClusterStatusData(data)
		if err != nil {
			if protocol.CodeOf(err) != protocol.CodeInvalidRequest {
				t.Fatalf("error %v: code %s", err, protocol.CodeOf(err))
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("decoded data does not validate: %v", err)
		}
		again, err := protocol.DecodeClusterStatusData(protocol.MustMarshal(d))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(again.Nodes) != len(d.Nodes) || again.Node != d.Node || again.Enabled != d.Enabled {
			t.Fatalf("re-decode %+v, want %+v", again, d)
		}
	})
}
