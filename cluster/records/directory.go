package records

import (
	"context"
	"errors"
)

// AgentsOfNode returns the directory entries of the agents node hosts.
// The directory is keyed by agent id alone, because every command routed
// across the cluster looks an agent up by its id (one keyed read), while
// asking for a node's agents is rare (cluster status, a node's return):
// so this is a listing filtered by Node, not a key prefix.
func (r *Records) AgentsOfNode(ctx context.Context, node string) ([]Entry[AgentEntry], error) {
	all, err := r.Agents.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := []Entry[AgentEntry]{}
	for _, e := range all {
		if e.Value.Node == node {
			out = append(out, e)
		}
	}
	return out, nil
}

// BindAlias binds a parent's normalized alias to agentID, once across the
// cluster: the first node to bind it wins (Create), binding it again to
// the same agent is a no-op, and binding it to another agent is
// ErrExists (code CONFLICT) — the rule the single node's store keeps in
// one transaction.
func (r *Records) BindAlias(ctx context.Context, parentAgentID, normAlias, agentID string) error {
	key := AliasKey(parentAgentID, normAlias)
	_, err := r.Aliases.Create(ctx, key, AliasEntry{ParentAgentID: parentAgentID, Alias: normAlias, AgentID: agentID})
	if !errors.Is(err, ErrExists) {
		return err
	}
	e, gerr := r.Aliases.Get(ctx, key)
	if gerr == nil && e.Value.AgentID == agentID {
		return nil
	}
	return err
}
