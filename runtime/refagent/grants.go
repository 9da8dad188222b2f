package refagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/tools"
)

// grantsFileName holds the allow_always grants of a session, next to its
// transcript.
const grantsFileName = "grants.jsonl"

// Grant rule kinds (docs/protocol.md §9.5): an exact request, and the
// bash_signature kind a backend-built choice persists.
const (
	grantExact         = "exact"
	grantBashSignature = "bash_signature"
	// bashSignatureVersion is the one version of bash_signature this
	// runtime's matcher reads; any other fails closed.
	bashSignatureVersion = 1
)

// grantRecord is one line of grants.jsonl: an exact request (the tool and
// its arguments; kind absent in lines written before kinds existed) or a
// bash_signature rule (the signatures of a command line's simple commands,
// bashsig.go) that the user allowed always.
type grantRecord struct {
	Kind       string          `json:"kind,omitempty"`
	Version    int             `json:"version,omitempty"`
	Tool       string          `json:"tool"`
	Args       map[string]any  `json:"args"`
	Signatures []bashSignature `json:"signatures,omitempty"`
	GrantedAt  int64           `json:"granted_at"` // epoch milliseconds
}

// grants are the allow_always grants of the Agent: exact requests, keyed by
// grantKey, and bash signatures, remembered in grants.jsonl (0600) in the
// session directory so that they survive runtime restarts. A line that
// cannot be read, of an unknown kind or version, or malformed, grants
// nothing (fail closed). Without a session directory grants last for the
// run only.
//
// grants are safe for concurrent use. No event announces a grant, so they
// keep their own lock instead of runtime.mu, and a grant's fsync never
// holds up the runtime's commands. mu is a leaf: nothing else is locked
// while it is held.
type grants struct {
	path string // "" keeps grants in memory only

	// mu protects keys and sigs and serialises the appends to path.
	mu   sync.Mutex
	keys map[string]bool
	sigs []bashSignature // every bash_signature grant's, deduplicated
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
		if rec.Kind == grantBashSignature {
			g.addSigsLocked(rec.Signatures)
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
	switch rec.Kind {
	case "", grantExact:
		if rec.Tool == "" || rec.Args == nil {
			return rec, errors.New("grant without tool or args")
		}
	case grantBashSignature:
		if rec.Version != bashSignatureVersion || rec.Tool != tools.NameBash || len(rec.Signatures) == 0 {
			return rec, fmt.Errorf("bash_signature grant of version %d for %q with %d signatures", rec.Version, rec.Tool, len(rec.Signatures))
		}
		for _, sig := range rec.Signatures {
			if !sig.valid() {
				return rec, errors.New("malformed bash signature")
			}
		}
	default:
		return rec, fmt.Errorf("unknown grant kind %q", rec.Kind)
	}
	return rec, nil
}

// addSigsLocked adds signatures not granted yet.
func (g *grants) addSigsLocked(sigs []bashSignature) {
	for _, s := range sigs {
		if !slices.ContainsFunc(g.sigs, s.equal) {
			g.sigs = append(g.sigs, s)
		}
	}
}

// allows reports whether c was allowed always: as this exact request, or
// (bash) because every simple command of its command line has a granted
// signature. A command line analyzeBash refuses matches no signature.
func (g *grants) allows(c toolCallReq) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keys[grantKey(c)] {
		return true
	}
	if c.name != tools.NameBash || len(g.sigs) == 0 {
		return false
	}
	sigs, err := commandSignatures(c)
	if err != nil {
		return false
	}
	for _, s := range sigs {
		if !slices.ContainsFunc(g.sigs, s.equal) {
			return false
		}
	}
	return true
}

// commandSignatures are the signatures of a bash call's command line.
func commandSignatures(c toolCallReq) ([]bashSignature, error) {
	cmd, ok := c.args["command"].(string)
	if !ok {
		return nil, errUnanalyzable
	}
	return analyzeBash(cmd)
}

// addSignatures remembers sigs as allowed always (a bash_signature grant),
// and writes them to grants.jsonl (synced) when there is a session
// directory. The grant holds for this run even if the write fails.
func (g *grants) addSignatures(sigs []bashSignature, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addSigsLocked(sigs)
	return g.appendLocked(grantRecord{Kind: grantBashSignature, Version: bashSignatureVersion, Tool: tools.NameBash, Signatures: sigs, GrantedAt: now.UnixMilli()})
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
	return g.appendLocked(grantRecord{Tool: c.name, Args: c.args, GrantedAt: now.UnixMilli()})
}

// appendLocked appends rec to grants.jsonl, synced; nothing without a
// session directory.
func (g *grants) appendLocked(rec grantRecord) error {
	if g.path == "" {
		return nil
	}
	b, err := protocol.Marshal(rec)
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
