package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestClusterSettings: the cluster.* keys come from the config file's
// cluster: section, SHARD_CLUSTER_* and --cluster.* alike, and a
// configuration that sets none of them is no cluster.
func TestClusterSettings(t *testing.T) {
	f := newFixture(t)
	c, err := f.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster.Enabled() {
		t.Fatalf("default configuration is clustered: %+v", c.Cluster)
	}

	f.writeFile(t, "cluster:\n  node: n1\n  listen: 127.0.0.1:6250\n  routes:\n    - nats://127.0.0.1:6251\n    - nats://127.0.0.1:6252\n  lease: 3s\n")
	c, err = f.load(t, []string{"--cluster.replicas=1"}, []string{"SHARD_CLUSTER_TOKEN=s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	want := ClusterConfig{Node: "n1", Listen: "127.0.0.1:6250",
		Routes: []string{"nats://127.0.0.1:6251", "nats://127.0.0.1:6252"},
		Token:  "s3cret", Replicas: 1, Lease: 3 * time.Second}
	if !c.Cluster.Enabled() || c.Cluster.Node != want.Node || c.Cluster.Listen != want.Listen ||
		!slices.Equal(c.Cluster.Routes, want.Routes) || c.Cluster.Token != want.Token ||
		c.Cluster.Replicas != want.Replicas || c.Cluster.Lease != want.Lease {
		t.Fatalf("cluster = %+v, want %+v", c.Cluster, want)
	}

	// One setting alone turns cluster mode on (the daemon then asks for
	// cluster.node), so a half-written cluster section is never ignored.
	only := Default("").Cluster
	only.Lease = time.Minute
	if !only.Enabled() {
		t.Fatal("cluster.lease alone: not enabled")
	}

	// A bad value is refused naming the key, never echoing the token.
	_, err = f.load(t, []string{"--cluster.replicas=7"}, []string{"SHARD_CLUSTER_TOKEN=s3cret"})
	if err == nil || !strings.Contains(err.Error(), "cluster.replicas") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("replicas 7: err = %v", err)
	}
}
