package clustertest

import (
	"net"
	"testing"
)

// Mesh is the relays of an n-node cluster: Front(i) is the address
// node i advertises (routes the others learn by gossip reach it there),
// and node i dials node j through a relay of the pair (i, j). Every
// route into or out of a node therefore crosses a relay that Isolate
// can cut.
//
// A node is set up with Routes(i) and Advertise(i), listens on port -1,
// and reports the address it bound with Bound (cluster.Hooks.RouteBound)
// before it waits for the others. Methods are safe for concurrent use.
type Mesh struct {
	n     int
	front []*Relay
	pair  [][]*Relay // pair[i][j]: node i's route to node j
}

// NewMesh makes the relays of n nodes; they stop when t ends.
func NewMesh(t testing.TB, n int) *Mesh {
	m := &Mesh{n: n}
	for i := range n {
		m.front = append(m.front, NewRelay(t))
		row := make([]*Relay, n)
		for j := range n {
			if j != i {
				row[j] = NewRelay(t)
			}
		}
		m.pair = append(m.pair, row)
	}
	return m
}

// Routes are the route URLs node i dials: one per other node.
func (m *Mesh) Routes(i int) []string {
	var routes []string
	for j := range m.n {
		if j != i {
			routes = append(routes, m.pair[i][j].URL())
		}
	}
	return routes
}

// Advertise is the host:port node i advertises to the others.
func (m *Mesh) Advertise(i int) string { return m.front[i].Addr() }

// Front is node i's front relay: a node outside the mesh (a stranger,
// a late joiner) reaches node i through Front(i).URL().
func (m *Mesh) Front(i int) *Relay { return m.front[i] }

// Bound points every relay that leads to node i at addr, the route
// address node i bound (again after a restart).
func (m *Mesh) Bound(i int, addr *net.TCPAddr) {
	m.front[i].SetTarget(addr)
	for j := range m.n {
		if j != i {
			m.pair[j][i].SetTarget(addr)
		}
	}
}

// Isolate cuts every route into and out of node i, as a network
// partition would, until Heal.
func (m *Mesh) Isolate(i int) { m.setCut(i, true) }

// Heal lets node i's routes through again; the nodes reconnect on
// their own.
func (m *Mesh) Heal(i int) { m.setCut(i, false) }

func (m *Mesh) setCut(i int, cut bool) {
	m.front[i].SetCut(cut)
	for j := range m.n {
		if j == i {
			continue
		}
		m.pair[i][j].SetCut(cut)
		m.pair[j][i].SetCut(cut)
		if cut {
			// Node i may have reached j through j's front (a route
			// learned by gossip): drop those once; the others come
			// back through their own pair relays.
			m.front[j].DropAll()
		}
	}
}
