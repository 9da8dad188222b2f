package refagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/shard-dev/shard/protocol"
)

// grantsFileName holds the allow_always grants of a session, next to its
// transcript.
const grantsFileName = "grants.jsonl"

// grantRecord is one line of grants.jsonl: an exact request (the tool and
// its arguments) that the user allowed always.
type grantRecord struct {
	Tool      string         `json:"tool"`
	Args      map[string]any `json:"args"`
	GrantedAt int64          `json:"granted_at"` // epoch milliseconds
}

// grants are the allow_always grants of the Agent: exact requests, keyed by
// grantKey, remembered in grants.jsonl (0600) in the session directory so
// that they survive runtime restarts. A line that cannot be read grants
// nothing (fail closed). Without a session directory grants last for the
// run only.
//
// grants are safe for concurrent use. No event announces a grant, so they
// keep their own lock instead of runtime.mu, and a grant's fsync never
// holds up the runtime's commands. mu is a leaf: nothing else is locked
// while it is held.
type grants struct {
	path string // "" keeps grants in memory only

	// mu protects keys and serialises the appends to path.
	mu   sync.Mutex
	keys map[string]bool
}

// loadGrants reads the grants in dir. A torn last line (a crash mid-write)
// is cut, so the next grant starts on a clean line.
func loadGrants(dir string, log *slog.Logger) (*grants, error) {
	g := &grants{keys: make(map[string]bool)}
	if dir == "" {
		return g, nil
	}
	g.path = filepath.Join(dir, grantsFileName)
	data, err := os.ReadFile(g.path)
	if errors.Is(err, os.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: read grants: %w", err)
	}
	if n := len(data); n > 0 && data[n-1] != '\n' {
		keep := bytes.LastIndexByte(data, '\n') + 1
		if err := os.Truncate(g.path, int64(keep)); err != nil {
			return nil, fmt.Errorf("agent: repair grants: %w", err)
		}
		data = data[:keep]
	}
	for i, line := range bytes.Split(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec, err := decodeGrant(line)
		if err != nil {
			log.Warn("ignoring an unreadable grant", "line", i+1, slog.Any("err", err))
			continue
		}
		g.keys[grantKey(toolCallReq{name: rec.Tool, args: rec.Args})] = true
	}
	return g, nil
}

// decodeGrant decodes a grant line. Numbers keep their text, as in the
// tool calls they are compared with.
func decodeGrant(line []byte) (grantRecord, error) {
	var rec grantRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&rec); err != nil {
		return rec, fmt.Errorf("decode grant: %w", err)
	}
	if rec.Tool == "" || rec.Args == nil {
		return rec, errors.New("grant without tool or args")
	}
	return rec, nil
}

// has reports whether the exact request key was allowed always.
func (g *grants) has(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.keys[key]
}

// add remembers c as allowed always, and writes it to grants.jsonl (synced)
// when there is a session directory. The grant holds for this run even if
// the write fails.
func (g *grants) add(c toolCallReq, now time.Time) error {
	key := grantKey(c)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keys[key] {
		return nil
	}
	g.keys[key] = true
	if g.path == "" {
		return nil
	}
	b, err := protocol.Marshal(grantRecord{Tool: c.name, Args: c.args, GrantedAt: now.UnixMilli()})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(g.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("agent: open grants: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("agent: write grant: %w", err)
	}
	return nil
}
