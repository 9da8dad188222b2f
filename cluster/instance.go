package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// instanceFile is the file, in the node's store directory (or
// <home>/cluster in URL mode), that keeps the node's instance: a random
// id made at its first start. A node's name says which member it is; its
// instance says which home runs it. A record of this node's name written
// with another instance comes from another process, not from this
// node's previous life, and a live one means the name is taken.
const instanceFile = "shard-node-instance"

// instanceDir is where cfg's instance file lives: the store directory
// (the node's own, as its JetStream data is), else <home>/cluster. ""
// when there is neither: the instance is then new at each start, and a
// restart within a lease waits once to see its old record go silent.
func instanceDir(cfg Config) string {
	switch {
	case cfg.StoreDir != "":
		return cfg.StoreDir
	case cfg.Home != "":
		return filepath.Join(cfg.Home, "cluster")
	}
	return ""
}

// loadInstance reads the instance kept in dir, making and keeping one
// the first time.
func loadInstance(dir string) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	fresh := hex.EncodeToString(b)
	if dir == "" {
		return fresh, nil
	}
	path := filepath.Join(dir, instanceFile)
	if old, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(old)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("cluster: node instance: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("cluster: node instance: %w", err)
	}
	// Written aside and renamed, so a crash leaves the old file or the
	// new one, never half of one.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(fresh+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("cluster: node instance: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("cluster: node instance: %w", err)
	}
	return fresh, nil
}

// duplicateError is ErrDuplicateNode for the live record rec of node.
func duplicateError(node string, rec Record, how string) error {
	return fmt.Errorf("%w: cluster.node %q is taken: %s (incarnation %d, started %s, version %q); stop that shardd or give this one another cluster.node",
		ErrDuplicateNode, node, how, rec.Incarnation, rec.StartedAt.Format(time.RFC3339), rec.Version)
}

// checkName decides whether prev, the record of this node's name found
// at revision rev, belongs to a live process other than this node: it
// returns ErrDuplicateNode then, nil when the name is this node's to
// take. A record of this node's own instance is its previous life (one
// home runs one daemon), and so is an incarnation already declared
// dead. Otherwise the record is watched for one of its leases: a
// heartbeat in that time shows a live process (it heartbeats every
// third of its lease); silence shows a dead one, which survivors would
// declare too.
func (m *membership) checkName(ctx context.Context, prev Record, rev uint64) error {
	if prev.Incarnation == 0 || (prev.Instance != "" && prev.Instance == m.instance) {
		return nil
	}
	var declared bool
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		declared, err = m.declared(ctx, m.self, prev.Incarnation)
		return err
	})
	if err != nil || declared {
		return err
	}
	m.log.Info("membership: a record of this node's name from another home; waiting one lease for a heartbeat",
		"incarnation", prev.Incarnation, "lease", prev.Lease())
	wctx, cancel := context.WithTimeout(ctx, prev.Lease())
	defer cancel()
	w, err := m.kv.Watch(wctx, nodeKey(m.self))
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			return nil // silent for a whole lease
		}
		return err
	}
	defer func() {
		// As watch.stop: nats.go delivers into the channel under a lock
		// its closing takes too, so it is drained until it closes.
		cancel()
		go func() {
			for range w.Updates() {
			}
		}()
		_ = w.Stop()
	}()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("cluster: watch of %s ended", nodeKey(m.self))
			}
			if e == nil || e.Revision() <= rev || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var rec Record
			if json.Unmarshal(e.Value(), &rec) == nil && rec.Instance == m.instance && rec.Instance != "" {
				return nil // this node's own, written by an earlier attempt
			}
			return duplicateError(m.self, rec, "another process heartbeats it")
		case <-wctx.Done():
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return nil
		}
	}
}

// declared says whether node's incarnation inc was declared dead.
func (m *membership) declared(ctx context.Context, node string, inc uint64) (bool, error) {
	_, err := m.kv.Get(ctx, deadKey(node, inc))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	}
	return false, err
}
