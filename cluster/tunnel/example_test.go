package tunnel_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/shard-dev/shard/cluster/tunnel"
)

// One node serves a subject; another dials it and gets a net.Conn. Here
// both ends share one NATS server and connection, and the serving end
// echoes.
func Example() {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	defer s.WaitForShutdown()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		log.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	ln, err := tunnel.Listen(nc, "shard.node.n2.gateway", tunnel.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c) // echo until the dialer's CloseWrite
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tunnel.Dial(ctx, nc, "shard.node.n2.gateway", tunnel.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello over NATS")); err != nil {
		log.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil { // io.EOF on the other side
		log.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		log.Fatal(err)
	}
	<-served
	fmt.Println(string(b), c.RemoteAddr().Network())
	// Output: hello over NATS nats
}
