package store

import (
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// This file holds the helpers every record kind uses: JSON values stored by
// string key in a named bucket. Decoding with json.Unmarshal copies every
// byte out of bbolt's memory map, so decoded values stay valid after the
// transaction ends; raw []byte from Get must never escape a transaction.

// bucket returns the named bucket, or an ErrSchema error if the file lacks
// it (Open creates every bucket, so that means a foreign or damaged file).
func bucket(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	b := tx.Bucket([]byte(name))
	if b == nil {
		return nil, fmt.Errorf("%w: bucket %q missing", ErrSchema, name)
	}
	return b, nil
}

// exists reports whether key is present in the named bucket.
func exists(tx *bolt.Tx, name, key string) (bool, error) {
	b, err := bucket(tx, name)
	if err != nil {
		return false, err
	}
	return b.Get([]byte(key)) != nil, nil
}

// getJSON decodes the value at key in the named bucket into v. It reports
// false, and leaves v alone, when the key is absent.
func getJSON(tx *bolt.Tx, name, key string, v any) (bool, error) {
	b, err := bucket(tx, name)
	if err != nil {
		return false, err
	}
	raw := b.Get([]byte(key))
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("decode %s record %q: %w", name, key, err)
	}
	return true, nil
}

// putJSON encodes v and stores it at key in the named bucket. tx must be
// writable. A manifest for the agents bucket goes through putAgent, which
// keeps the agent indexes (agentindex.go) whoever writes it.
func putJSON(tx *bolt.Tx, name, key string, v any) error {
	if name == bucketAgents {
		switch a := v.(type) {
		case Agent:
			if a.AgentID == key {
				return putAgent(tx, &a)
			}
		case *Agent:
			if a.AgentID == key {
				return putAgent(tx, a)
			}
		}
		return fmt.Errorf("%w: agents record %q is not its manifest", ErrInvalid, key)
	}
	b, err := bucket(tx, name)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s record %q: %w", name, key, err)
	}
	if err := b.Put([]byte(key), raw); err != nil {
		return fmt.Errorf("put %s record %q: %w", name, key, err)
	}
	return nil
}

// listJSON decodes every value in the named bucket, in key order.
func listJSON[T any](tx *bolt.Tx, name string) ([]T, error) {
	b, err := bucket(tx, name)
	if err != nil {
		return nil, err
	}
	out := []T{}
	err = b.ForEach(func(k, raw []byte) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("decode %s record %q: %w", name, k, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// wrapOp prefixes err with the failed operation, unless it already carries
// one of this package's sentinels (whose text says what went wrong and
// names the record).
func wrapOp(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels() {
		if errors.Is(err, s) {
			return err
		}
	}
	return fmt.Errorf("store: "+format+": %w", append(args, err)...)
}
