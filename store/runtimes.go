package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// RuntimeProc records a live runtime child process, so that the next
// daemon can kill what a crashed one left behind (its process group,
// including tool subprocesses that outlive the runtime). StartTime is the
// process start time from /proc, so a reused pid is never killed.
type RuntimeProc struct {
	AgentID   string `json:"agent_id"`
	Epoch     int64  `json:"epoch"`
	PID       int    `json:"pid"`
	PGID      int    `json:"pgid"`
	StartTime uint64 `json:"start_time"`
}

func runtimeKey(agentID string) string { return agentID }

// PutRuntime records the live runtime of an agent (one per agent).
func (s *Store) PutRuntime(p RuntimeProc) error {
	err := s.update(func(tx *bolt.Tx) error { return putJSON(tx, bucketRuntimes, runtimeKey(p.AgentID), p) })
	return wrapOp(err, "record runtime of %q", p.AgentID)
}

// DeleteRuntime forgets an agent's runtime record if it is for epoch.
func (s *Store) DeleteRuntime(agentID string, epoch int64) error {
	err := s.update(func(tx *bolt.Tx) error {
		var p RuntimeProc
		found, err := getJSON(tx, bucketRuntimes, runtimeKey(agentID), &p)
		if err != nil || !found || p.Epoch != epoch {
			return err
		}
		b, err := bucket(tx, bucketRuntimes)
		if err != nil {
			return err
		}
		return b.Delete([]byte(runtimeKey(agentID)))
	})
	return wrapOp(err, "forget runtime of %q", agentID)
}

// TakeRuntimes returns every runtime record and clears them, in one
// transaction (startup: the previous daemon's children).
func (s *Store) TakeRuntimes() ([]RuntimeProc, error) {
	var out []RuntimeProc
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		if out, err = listJSON[RuntimeProc](tx, bucketRuntimes); err != nil {
			return err
		}
		if err := tx.DeleteBucket([]byte(bucketRuntimes)); err != nil {
			return fmt.Errorf("clear runtimes: %w", err)
		}
		_, err = tx.CreateBucket([]byte(bucketRuntimes))
		return err
	})
	return out, wrapOp(err, "take runtimes")
}
