package clustertest

import (
	"bytes"
	"io"
	"net"
	"regexp"
	"sync"
)

// routeLine is what shardd prints on stderr when its route listener is
// bound: "shardd: cluster node n1 takes routes on 127.0.0.1:PORT".
var routeLine = regexp.MustCompile(`cluster node \S+ takes routes on (\S+)`)

// RouteWatcher returns a writer for node i's stderr (a shardd binary's):
// it reads the output as it is written and points the mesh's relays at
// the route address the node reports, so a node may listen on port 0
// behind relays the test owns.
func (m *Mesh) RouteWatcher(i int) io.Writer { return &routeWatcher{mesh: m, i: i} }

type routeWatcher struct {
	mesh *Mesh
	i    int

	mu   sync.Mutex
	line []byte
}

func (w *routeWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, p...)
	for {
		nl := bytes.IndexByte(w.line, '\n')
		if nl < 0 {
			return len(p), nil
		}
		if m := routeLine.FindSubmatch(w.line[:nl]); m != nil {
			if a, err := net.ResolveTCPAddr("tcp", string(m[1])); err == nil {
				w.mesh.Bound(w.i, a)
			}
		}
		w.line = w.line[nl+1:]
	}
}
