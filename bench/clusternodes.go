//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/cluster/clustertest"
	"github.com/shard-dev/shard/protocol"
)

// Starting the cluster scenario's nodes, and asking them whether they
// formed one cluster.

// benchTB lets the driver use clustertest's relays, which are written for
// tests: their cleanups join the driver's (atCleanup) and a failure to
// listen on a loopback port panics, which ends the run.
type benchTB struct{ testing.TB }

func (benchTB) Helper()                      {}
func (benchTB) Cleanup(f func())             { atCleanup(f) }
func (benchTB) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (benchTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (benchTB) Context() context.Context     { return context.Background() }

// clusterOf is k nodes: a single shardd for k = 1, otherwise the nodes
// n1…nk of one cluster.
type clusterOf struct {
	nodes []*daemon
	names []string
	// token is the cluster's token (its clients' too); natsURL is n1's
	// client port when startNodes was asked for one.
	token, natsURL string
}

// startNodes starts k nodes on fresh homes with env added to their
// environment and waits until every one serves and, for a cluster, sees
// every node alive. Two nodes keep one copy of each replicated record
// (cluster.replicas 1): a replicated bucket refuses two copies (a write
// needs both) and three need three servers.
func startNodes(o *options, k int, env []string) (*clusterOf, error) {
	return startNodesOpts(o, k, env, false)
}

// startNodesOpts is startNodes; with clientPort, n1 also listens for NATS
// clients on a loopback port (cluster.client_listen), whose URL is
// clusterOf.natsURL, so the driver can reach the cluster's records.
func startNodesOpts(o *options, k int, env []string, clientPort bool) (*clusterOf, error) {
	if k == 1 {
		d, err := startDaemon(o, env)
		if err != nil {
			return nil, err
		}
		return &clusterOf{nodes: []*daemon{d}, names: []string{""}}, nil
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	env = append(slices.Clip(env), "SHARD_CLUSTER_TOKEN="+hex.EncodeToString(token))
	mesh := clustertest.NewMesh(benchTB{}, k)
	cl := &clusterOf{token: hex.EncodeToString(token)}
	for i := range k {
		dir, err := tempDir()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("n%d", i+1)
		args := []string{"--cluster.node", name, "--cluster.listen", "127.0.0.1:0",
			"--cluster.advertise", mesh.Advertise(i), "--cluster.routes", strings.Join(mesh.Routes(i), ",")}
		if k == 2 {
			args = append(args, "--cluster.replicas", "1")
		}
		if clientPort && i == 0 {
			addr, err := freeLoopback()
			if err != nil {
				return nil, err
			}
			args = append(args, "--cluster.client-listen", addr)
			cl.natsURL = "nats://" + addr
		}
		d, err := spawnDaemonAt(o, filepath.Join(dir, "home"), env, mesh.RouteWatcher(i), args...)
		if err != nil {
			return nil, err
		}
		cl.nodes = append(cl.nodes, d)
		cl.names = append(cl.names, name)
	}
	for _, d := range cl.nodes {
		if err := d.WaitReady(clusterReady); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, d.stderr.String())
		}
	}
	for i, d := range cl.nodes {
		if err := waitClustered(d, cl.names); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", cl.names[i], err, d.stderr.String())
		}
	}
	return cl, nil
}

// clusterStatus asks d for cluster.status.
func clusterStatus(c *client.Conn) (protocol.ClusterStatusData, error) {
	ctx, cancel := context.WithTimeout(context.Background(), reqTimeout)
	defer cancel()
	resp, err := c.Request(ctx, &protocol.ClusterStatus{Header: protocol.Header{Type: protocol.TypeClusterStatus}})
	if err != nil {
		return protocol.ClusterStatusData{}, err
	}
	return protocol.DecodeClusterStatusData(resp.Data)
}

// waitClustered waits until d's cluster.status shows every node of names
// alive, d itself marked self.
func waitClustered(d *daemon, names []string) error {
	c, err := d.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	drain(c)
	deadline := time.Now().Add(clusterReady)
	var last string
	for {
		st, err := clusterStatus(c)
		if err == nil {
			if alive := aliveNodes(st); slices.Equal(alive, names) && st.Enabled {
				return nil
			}
			last = fmt.Sprintf("%+v", st)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every node of %v alive within %s: %s", names, clusterReady, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// aliveNodes are the nodes st shows alive, by name.
func aliveNodes(st protocol.ClusterStatusData) []string {
	var out []string
	for _, n := range st.Nodes {
		if n.Health == protocol.NodeAlive {
			out = append(out, n.Node)
		}
	}
	sort.Strings(out)
	return out
}
