package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shard-dev/shard/cluster"
	"github.com/shard-dev/shard/config"
	"github.com/shard-dev/shard/internal/daemon"
	"github.com/shard-dev/shard/protocol"
)

// clusterStatus asks c's daemon for cluster.status.
func clusterStatus(t *testing.T, h *harness) protocol.ClusterStatusData {
	t.Helper()
	c := h.dial()
	var st protocol.ClusterStatusData
	if err := c.Call(ctx(t), &protocol.ClusterStatus{Header: protocol.Header{Type: protocol.TypeClusterStatus}}, &st); err != nil {
		t.Fatalf("cluster.status: %v", err)
	}
	if err := st.Validate(); err != nil {
		t.Fatalf("cluster.status answer %+v: %v", st, err)
	}
	return st
}

// TestClusterSingleShardd: with no cluster.* setting, cluster.status
// answers {"enabled":false}, agents carry no node, and nothing of a
// cluster appears in the home.
func TestClusterSingleShardd(t *testing.T) {
	h := start(t, nil)
	if st := clusterStatus(t, h); st.Enabled || st.Node != "" || st.Nodes != nil {
		t.Fatalf("cluster.status = %+v, want enabled:false alone", st)
	}
	c := h.dial()
	id := h.create(c, nil)
	var list protocol.AgentListData
	if err := c.Call(ctx(t), &protocol.AgentList{Header: protocol.Header{Type: protocol.TypeAgentList}}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Agents) != 1 || list.Agents[0].AgentID != id || list.Agents[0].Node != "" {
		t.Fatalf("agent.list = %+v, want %s without a node", list.Agents, id)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.Home, "cluster")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a single shardd made %s/cluster: %v", h.cfg.Home, err)
	}
	if strings.Contains(h.log.String(), "cluster") {
		t.Fatalf("a single shardd logged about a cluster:\n%s", h.log.String())
	}
}

// TestClusterSettingsRefused: settings the cluster refuses fail the
// daemon before its home is made, naming the setting, never the token.
func TestClusterSettingsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*config.ClusterConfig)
		want   string
		is     error
	}{
		"non-loopback listen without a token": {func(c *config.ClusterConfig) { c.Node, c.Listen = "n1", "10.1.2.3:6250" }, "cluster.listen", cluster.ErrInsecure},
		"non-loopback route without TLS": {func(c *config.ClusterConfig) {
			c.Node, c.Listen, c.Token, c.Routes = "n1", "127.0.0.1:0", "s3cret-token", []string{"nats://10.1.2.3:6250"}
		}, "cluster.routes", cluster.ErrInsecure},
		"a setting without cluster.node": {func(c *config.ClusterConfig) { c.Listen = "127.0.0.1:0"; c.Token = "s3cret-token" }, "cluster.node", cluster.ErrInvalidConfig},
		"a bad node name":                {func(c *config.ClusterConfig) { c.Node, c.Listen = "n.1", "127.0.0.1:0" }, "cluster.node", cluster.ErrInvalidConfig},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := newConfig(t)
			tc.mutate(&cfg.Cluster)
			_, err := daemon.New(cfg, daemon.Options{Version: "test"})
			if err == nil || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %v naming %s", err, tc.is, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error quotes the token: %v", err)
			}
			if _, err := os.Stat(cfg.Home); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused daemon made its home: %v", err)
			}
		})
	}
}
