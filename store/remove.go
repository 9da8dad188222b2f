package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/shard-dev/shard/protocol"
)

// InUseError refuses DeleteAgent: something durable still needs the Agent.
// It wraps ErrConflict; Kind is one of the protocol.Remove* kinds.
type InUseError struct {
	AgentID string
	Kind    string
	Reason  string
}

// Error implements error.
func (e *InUseError) Error() string {
	return fmt.Sprintf("store: agent %q is in use (%s): %s", e.AgentID, e.Kind, e.Reason)
}

// Unwrap makes an InUseError an ErrConflict.
func (e *InUseError) Unwrap() error { return ErrConflict }

// DeleteAgent forgets the manifest of id and the parent-scoped aliases
// bound to it, in one transaction that first checks, against the records
// as they are at that commit, that nothing durable needs the Agent: no job
// that has not ended names it as a run's agent or as its parent, no
// completion report of it or for it waits for delivery, and the workspace
// it is bound to (if any) is retired. A refusal is an *InUseError (wrapping
// ErrConflict); a missing id is ErrNotFound. It returns the deleted
// manifest. Runtime liveness is not the store's to know: the registry
// checks it before it asks.
func (s *Store) DeleteAgent(id string) (Agent, error) {
	var a Agent
	err := s.update(func(tx *bolt.Tx) error {
		a = Agent{} // a group-commit retry runs this again
		found, err := getJSON(tx, bucketAgents, id, &a)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: agent %q", ErrNotFound, id)
		}
		if err := agentInUse(tx, &a); err != nil {
			return err
		}
		al, err := bucket(tx, bucketAliases)
		if err != nil {
			return err
		}
		var drop [][]byte // collected first: deleting while iterating skips keys
		prefix := []byte(scoped(a.ParentAgentID, ""))
		cur := al.Cursor()
		for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
			if string(v) == id {
				drop = append(drop, bytes.Clone(k))
			}
		}
		ap, err := bucket(tx, bucketAliasParents)
		if err != nil {
			return err
		}
		for _, k := range drop {
			if err := al.Delete(k); err != nil {
				return err
			}
			// The reverse entry: normalized alias \x00 parent.
			if err := ap.Delete([]byte(scoped(string(k[len(prefix):]), a.ParentAgentID))); err != nil {
				return err
			}
		}
		return deleteAgent(tx, &a)
	})
	if err != nil {
		return Agent{}, wrapOp(err, "delete agent %q", id)
	}
	return a, nil
}

// agentInUse returns an *InUseError if a durable record still needs a.
func agentInUse(tx *bolt.Tx, a *Agent) error {
	inUse := func(kind, format string, args ...any) error {
		return &InUseError{AgentID: a.AgentID, Kind: kind, Reason: fmt.Sprintf(format, args...)}
	}
	if a.WorkspaceID != "" {
		var w Workspace
		found, err := getJSON(tx, bucketWorkspaces, a.WorkspaceID, &w)
		if err != nil {
			return err
		}
		if found && w.Live() {
			return inUse(protocol.RemoveWorkspace, "bound to workspace %s, which is %s (retire it first)", w.WorkspaceID, w.State)
		}
	}
	open, err := bucket(tx, bucketOpenJobs)
	if err != nil {
		return err
	}
	var jobIDs []string
	if err := open.ForEach(func(k, _ []byte) error { jobIDs = append(jobIDs, string(k)); return nil }); err != nil {
		return err
	}
	for _, jid := range jobIDs {
		var j Job
		found, err := getJSON(tx, bucketJobs, jid, &j)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		if j.ParentAgentID == a.AgentID {
			return inUse(protocol.RemoveJobOpen, "parent of job %s, which has not ended", j.JobID)
		}
		for _, r := range j.Runs {
			if r.AgentID == a.AgentID {
				return inUse(protocol.RemoveJobOpen, "agent of run %s (%s) of job %s, which has not ended", r.RunID, r.State, j.JobID)
			}
		}
	}
	reports, err := listJSON[Report](tx, bucketReports)
	if err != nil {
		return err
	}
	for _, r := range reports {
		if r.AgentID == a.AgentID || r.ParentAgentID == a.AgentID {
			return inUse(protocol.RemoveReport, "the completion report of run %s is not delivered yet", r.RunID)
		}
	}
	return nil
}
