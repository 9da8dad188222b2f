package protocol_test

import (
	"fmt"
	"strings"

	"github.com/shard-dev/shard/protocol"
)

// A server reads JSONL records, decodes each command and answers with a
// response that echoes the command's id and type (docs/protocol.md §9.3). A
// record that fails to decode still gets a response carrying its id when that
// was readable.
func Example() {
	in := strings.NewReader(
		`{"id":"c1","type":"agent.create","cwd":"/work"}` + "\r\n" +
			`{"id":"p1","type":"prompt","agent_id":"a-3","message":5}` + "\n")
	r := protocol.NewReader(in, 0)
	w := protocol.NewWriter(stdout{})
	for {
		rec, err := r.Next()
		if err != nil {
			break // io.EOF
		}
		cmd, h, err := protocol.DecodeCommand(rec)
		if err != nil {
			_ = w.WriteRecord(protocol.NewErrorResponse(h.ID, h.Type, err))
			continue
		}
		switch c := cmd.(type) {
		case *protocol.AgentCreate:
			fmt.Printf("create an agent in %s\n", c.Cwd)
			_ = w.WriteRecord(protocol.NewResponse(h.ID, h.Type, protocol.AgentCreateData{AgentID: "a-4"}))
		}
	}
	// Output:
	// create an agent in /work
	// {"type":"response","id":"c1","command":"agent.create","success":true,"data":{"agent_id":"a-4"}}
	// {"type":"response","id":"p1","command":"prompt","success":false,"error":{"code":"INVALID_REQUEST","message":"field \"message\": expected string, got number"}}
}

// stdout stands in for os.Stdout so that the example's output is checked.
type stdout struct{}

func (stdout) Write(p []byte) (int, error) { fmt.Print(string(p)); return len(p), nil }

func ExampleWithAgentID() {
	// A runtime speaks the direct protocol, without agent_id; the daemon
	// adds it on the way to clients without decoding the record.
	rec := []byte(`{"type":"status","status":"idle"}`)
	fmt.Println(string(protocol.WithAgentID(rec, "a-3")))
	fmt.Println(protocol.PeekType(rec))
	// Output:
	// {"type":"status","agent_id":"a-3","status":"idle"}
	// status
}
