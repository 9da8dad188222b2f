package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// Dial the daemon, list its agents, then follow one agent's stream.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, "/home/me/.shard/daemon.sock")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	var list protocol.AgentListData
	if err := conn.Call(ctx, &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil {
		log.Fatal(err) // a failed response is a *protocol.Error: protocol.CodeOf(err)
	}
	if len(list.Agents) == 0 {
		return
	}
	id := list.Agents[0].AgentID
	attach := &protocol.AgentAttach{Header: protocol.Header{Type: protocol.TypeAgentAttach, AgentID: id}, Role: protocol.RoleObserver}
	if err := conn.Call(ctx, attach, nil); err != nil {
		log.Fatal(err)
	}
	// Keep draining Events: the reader blocks when its buffer is full.
	for ev := range conn.Events() {
		switch m := ev.Msg.(type) {
		case *protocol.MessageDelta:
			fmt.Print(m.TextDelta)
		case *protocol.TurnEnd:
			return
		}
	}
	log.Print(conn.Err())
}
