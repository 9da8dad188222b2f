package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shard-dev/shard/actors/registry"
	"github.com/shard-dev/shard/internal/outbox"
	"github.com/shard-dev/shard/protocol"
)

// Gathering (docs/protocol.md §13 "Jobs and workspaces of other nodes").
// In a cluster, jobs.list and workspace.list list the whole cluster's, and
// a command naming one job or workspace reaches the node holding it. A
// node holds its own jobs and workspaces only (in its store); nothing
// directs a client to the node of a job or workspace id, so the
// connection asks: it hands the command to its own daemon and, through
// its upstream to each other node not declared dead (forward.go), to
// every other node, whose forwarded connection answers from that node
// alone (a forwarded command never gathers again: no loops). A gather
// ends when every node asked has answered, or gatherTimeout after it
// started: a node silent past it, or declared dead, or whose upstream
// failed, is unavailable.
//
// Each node's answer comes back under an id the gather gave the command
// (upstream.capture), so it never reaches the client; the client gets one
// response under its own id, merged (gather_merge.go).

// gathered is one node's answer to a gather's command: its response
// record, or why the node could not answer.
type gathered struct {
	node string
	rec  []byte
	err  *protocol.Error
}

// gatherKind is how a command's answers across the nodes become one.
type gatherKind int

const (
	// gatherNone: the command is not gathered.
	gatherNone gatherKind = iota
	// gatherJobs: jobs.list, merged newest first and paged again.
	gatherJobs
	// gatherWorkspaces: workspace.list without cwd, merged oldest first.
	gatherWorkspaces
	// gatherHolder: a command naming one job or workspace; the node
	// holding it answers (mergeHolder).
	gatherHolder
)

// gatherTimeout bounds a gather: a node that has not answered by then is
// unavailable. It is below forwardDialTimeout, so a node that cannot be
// dialed costs a gather no more than this.
const gatherTimeout = 10 * time.Second

// gatherKindOf says whether and how cmd is gathered.
func gatherKindOf(cmd *registry.Command) gatherKind {
	switch cmd.Header.Type {
	case protocol.TypeJobsList:
		return gatherJobs
	case protocol.TypeWorkspaceList:
		// A cwd is a path of this node's machine: that list is this
		// node's alone.
		if m, _ := cmd.Cmd.(*protocol.WorkspaceList); m != nil && m.Cwd == "" {
			return gatherWorkspaces
		}
	case protocol.TypeJobsShow, protocol.TypeWorkspaceStatus, protocol.TypeWorkspaceDiff,
		protocol.TypeWorkspaceMerge, protocol.TypeWorkspaceRetire, protocol.TypeWorkspaceAttach:
		return gatherHolder
	}
	return gatherNone
}

// gatherIDPrefix starts the id a gather gives its command on the other
// nodes (with the connection's id and a sequence number).
const gatherIDPrefix = "shard.gather."

// gather sends cmd to this node's daemon and every other live node, and
// answers the client once from what they answer (see Gathering). The
// actor only hands the command over; a goroutine of the gateway waits.
func (a *connActor) gather(c actor.Context, kind gatherKind, cmd *registry.Command) {
	cl := a.g.cfg.Cluster
	h := cmd.Header
	a.gathers++
	gid := fmt.Sprintf("%s%d.%d", gatherIDPrefix, a.id, a.gathers)
	remoteRec, err := withID(cmd.Raw, gid)
	if err != nil {
		a.out.Push(protocol.NewErrorResponse(h.ID, h.Type, protocol.Errorf(protocol.CodeInvalidRequest, "%w", err)))
		return
	}

	// This node's answer goes to an outbox of the gather's own.
	lo := outbox.New(outbox.Limits{})
	local := *a.client
	local.Out = lo
	c.Send(a.g.registry, &registry.Command{Client: &local, Header: h, Cmd: cmd.Cmd, Raw: cmd.Raw})

	nodes := cl.Nodes()
	ch := make(chan gathered, len(nodes)) // room for every answer: nobody blocks on a gather gone
	var asked, down []string
	var ups []*upstream
	for _, n := range nodes {
		if health, _ := cl.NodeHealth(n); health == HealthDead {
			down = append(down, n)
			continue
		}
		asked = append(asked, n)
		u := a.upstreamTo(c, n)
		u.capture(gid, remoteRec, ch)
		ups = append(ups, u)
	}

	self, out, ctx := cl.Node(), a.out, a.g.ctx
	bound := gatherTimeout
	if h := a.g.cfg.hooks; h != nil && h.gatherTimeout > 0 {
		bound = h.gatherTimeout
	}
	var limit int
	if m, _ := cmd.Cmd.(*protocol.JobsList); m != nil {
		limit = m.Limit
	}
	started := a.g.group.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		defer func() {
			for _, u := range ups {
				u.release(gid) // a node silent past the bound keeps nothing of it
			}
		}()
		mine := gathered{node: self, rec: localAnswer(ctx, lo, h.ID, out)}
		if mine.rec == nil {
			mine.err = protocol.Errorf(protocol.CodeTimeout, "%s: this node did not answer in %s", h.Type, bound)
		}
		answers := []gathered{mine}
		// A holder's answer from this node needs nobody else's.
		if kind != gatherHolder || mine.rec == nil || responseIs(mine.rec, protocol.CodeNotFound) {
			answers = append(answers, waitAnswers(ctx, ch, asked, kind == gatherHolder)...)
		}
		for _, n := range asked {
			if !answered(answers, n) {
				down = append(down, n)
			}
		}
		if kind == gatherHolder {
			out.Push(mergeHolder(h, answers, down))
			return
		}
		out.Push(mergeList(kind, h, limit, answers, down))
	})
	if !started {
		out.Push(protocol.NewErrorResponse(h.ID, h.Type, nodeUnavailable(self, "this node is shutting down")))
	}
}

// localAnswer reads this node's response to the command with id from lo;
// any other record the daemon sent the client on the way is passed on to
// out. nil when ctx ends first.
func localAnswer(ctx context.Context, lo *outbox.Outbox, id string, out *outbox.Outbox) []byte {
	defer lo.Close()
	for {
		recs, ok := lo.Next(ctx)
		if !ok {
			return nil
		}
		var answer []byte
		for _, rec := range recs {
			if rid, isResp := responseID(rec); isResp && rid == id && answer == nil {
				answer = rec
				continue
			}
			out.Push(rec)
		}
		if answer != nil {
			return answer
		}
	}
}

// waitAnswers collects the answers of the nodes asked until each has
// answered or ctx ends; with first, it stops at the first answer that is
// not NOT_FOUND (the holder's).
func waitAnswers(ctx context.Context, ch <-chan gathered, asked []string, first bool) []gathered {
	var got []gathered
	for len(got) < len(asked) {
		select {
		case g := <-ch:
			got = append(got, g)
			if first && g.rec != nil && !responseIs(g.rec, protocol.CodeNotFound) {
				return got
			}
		case <-ctx.Done():
			return got
		}
	}
	return got
}

// answered reports whether answers hold node's.
func answered(answers []gathered, node string) bool {
	for _, g := range answers {
		if g.node == node {
			return true
		}
	}
	return false
}

// withID returns the record rec (a command or a response) with its id
// replaced, every other member kept.
func withID(rec []byte, id string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(rec, &m); err != nil {
		return nil, fmt.Errorf("gateway: re-address a record: %w", err)
	}
	m["id"], _ = json.Marshal(id) // a string
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("gateway: re-address a record: %w", err)
	}
	return b, nil
}

// upstreamTo is this connection's upstream to node, opened when it has none.
func (a *connActor) upstreamTo(c actor.Context, node string) *upstream {
	u := a.upstreams[node]
	if u == nil {
		ident := forwardIdent{V: forwardVersion, Node: a.g.cfg.Cluster.Node(), Source: a.client.Source, Principal: a.cred.principal,
			Origin: a.client.Origin}
		u = newUpstream(a.g.ctx, node, ident, a.out, c.ActorSystem(), c.Self(), a.g.cfg.Cluster.Dial, a.g.group.Go)
		if a.upstreams == nil {
			a.upstreams, a.remote = map[string]*upstream{}, map[string]string{}
		}
		a.upstreams[node] = u
	}
	return u
}
