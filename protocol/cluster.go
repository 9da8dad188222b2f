package protocol

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// TypeClusterStatus is a Shard extension (docs/protocol.md §10.1, §13
// "Cluster"): the nodes of the cluster this daemon is a node of, as it
// sees them. Any node answers it; a single shardd answers enabled:false,
// not an error, so a client tells "not clustered" from "an old daemon"
// (which answers INVALID_REQUEST for an unknown type).
const TypeClusterStatus = "cluster.status"

// ClusterStatus asks for the cluster's nodes. It has no members.
type ClusterStatus struct{ Header }

// Validate implements Command.
func (c *ClusterStatus) Validate() error { return nil }

// NodeHealth is a node's health as the answering node sees it.
type NodeHealth string

// The health of a node.
const (
	// NodeAlive: its heartbeat changed within half its lease.
	NodeAlive NodeHealth = "alive"
	// NodeSuspect: no heartbeat for more than half its lease.
	NodeSuspect NodeHealth = "suspect"
	// NodeDead: no heartbeat for longer than its lease, or its
	// incarnation was declared dead.
	NodeDead NodeHealth = "dead"
)

// ClusterStatusData is the data of a cluster.status response.
type ClusterStatusData struct {
	// Enabled is false on a single shardd; the other members are then
	// omitted.
	Enabled bool `json:"enabled"`
	// Node is the answering node's name.
	Node string `json:"node,omitempty"`
	// Nodes is every node of the membership table, by name.
	Nodes []ClusterNode `json:"nodes,omitempty"`
}

// ClusterNode is one node of a cluster.status answer.
type ClusterNode struct {
	Node string `json:"node"`
	// Incarnation counts the node's runs: one more at each restart, and
	// each time the others declared it dead while it ran.
	Incarnation uint64     `json:"incarnation"`
	Health      NodeHealth `json:"health"`
	// StartedAt and HeartbeatAt are epoch milliseconds on the node's own
	// clock.
	StartedAt   int64 `json:"started_at"`
	HeartbeatAt int64 `json:"heartbeat_at"`
	// Load is what the node reported at its last heartbeat.
	Load NodeLoad `json:"load"`
	// Capacity is the subagent runs the node runs at once
	// (its jobs.max_active).
	Capacity int `json:"capacity"`
	// Version is the node's shardd version.
	Version string `json:"version,omitempty"`
	// Self marks the answering node.
	Self bool `json:"self,omitempty"`
	// Socket and WebURL are where the node takes clients, as it
	// published them (additive, docs/protocol.md §10.1): the absolute
	// path of its unix socket (on its machine) and the base URL of its
	// web listener as browsers reach it. A client whose node dies
	// reconnects through another node's; either may be omitted (an
	// older node, or one that has not published them yet).
	Socket string `json:"socket,omitempty"`
	WebURL string `json:"web_url,omitempty"`
}

// NodeLoad is what a node hosts: its agents (live or at rest), the
// agents whose runtime process is up, and its subagent runs starting or
// active.
type NodeLoad struct {
	Agents   int `json:"agents"`
	Runtimes int `json:"runtimes"`
	Runs     int `json:"runs"`
}

// Validate reports the first member of d a client cannot show: a node
// without a name, an unknown health, a negative count, a socket that is
// not an absolute path, a web URL that is not http(s), or two nodes
// marked self.
func (d *ClusterStatusData) Validate() error {
	if !d.Enabled {
		if d.Node != "" || len(d.Nodes) > 0 {
			return Errorf(CodeInvalidRequest, `field "nodes": a cluster.status that is not enabled has no nodes`)
		}
		return nil
	}
	if d.Node == "" {
		return Errorf(CodeInvalidRequest, `field "node": required when enabled`)
	}
	selves := 0
	for i, n := range d.Nodes {
		at := fmt.Sprintf(`field "nodes[%d]`, i)
		if n.Node == "" {
			return Errorf(CodeInvalidRequest, `%s.node": required`, at)
		}
		switch n.Health {
		case NodeAlive, NodeSuspect, NodeDead:
		default:
			return Errorf(CodeInvalidRequest, `%s.health": %q is not alive, suspect or dead`, at, n.Health)
		}
		if n.Load.Agents < 0 || n.Load.Runtimes < 0 || n.Load.Runs < 0 || n.Capacity < 0 {
			return Errorf(CodeInvalidRequest, `%s": negative count`, at)
		}
		if n.Socket != "" && (!strings.HasPrefix(n.Socket, "/") || strings.ContainsRune(n.Socket, 0)) {
			return Errorf(CodeInvalidRequest, `%s.socket": not an absolute path`, at)
		}
		if n.WebURL != "" {
			if u, err := url.Parse(n.WebURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return Errorf(CodeInvalidRequest, `%s.web_url": not an http(s) URL`, at)
			}
		}
		if n.Self {
			selves++
			if n.Node != d.Node {
				return Errorf(CodeInvalidRequest, `%s.self": marks %q, not the answering node %q`, at, n.Node, d.Node)
			}
		}
	}
	if selves > 1 {
		return Errorf(CodeInvalidRequest, `field "nodes": %d nodes marked self`, selves)
	}
	return nil
}

// DecodeClusterStatusData decodes and checks the data of a cluster.status
// response (a client's side: shardctl cluster status).
func DecodeClusterStatusData(b []byte) (ClusterStatusData, error) {
	var d ClusterStatusData
	if err := json.Unmarshal(b, &d); err != nil {
		return ClusterStatusData{}, Errorf(CodeInvalidRequest, "cluster.status data: %v", err)
	}
	if err := d.Validate(); err != nil {
		return ClusterStatusData{}, err
	}
	return d, nil
}
