package adapter

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/shard-dev/shard/protocol"
)

// windowFile holds the live window in the session directory, for a next
// generation whose agent resumes the session without replaying it
// (Offer.Resumed, docs/protocol.md Appendix A).
const windowFile = "window.json"

// saveWindowLocked keeps the live window in the session directory (none:
// nothing is kept). It is written at each turn's end, replacing the
// previous copy whole (a temporary file renamed over it), so a crash
// leaves the copy of the turn before. A failure is logged: the agent
// still has its session, only a resumed generation's window would lack
// the turn.
func (h *Host) saveWindowLocked() {
	if h.opts.SessionDir == "" {
		return
	}
	data, err := json.Marshal(h.liveWindowLocked().Messages)
	if err == nil {
		err = os.MkdirAll(h.opts.SessionDir, 0o700)
	}
	if err == nil {
		tmp := filepath.Join(h.opts.SessionDir, windowFile+".tmp")
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, filepath.Join(h.opts.SessionDir, windowFile))
		}
	}
	if err != nil {
		h.log.Warn("the live window cannot be kept", "err", err)
	}
}

// loadWindow reads the live window a previous generation kept; none (no
// session directory, no file) is an empty window, and one that cannot be
// read is logged and empty too.
func (h *Host) loadWindow() []protocol.Message {
	if h.opts.SessionDir == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(h.opts.SessionDir, windowFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var msgs []protocol.Message
	if err == nil {
		err = json.Unmarshal(data, &msgs)
	}
	if err != nil {
		h.log.Warn("the kept live window cannot be read; it starts empty", "err", err)
		return nil
	}
	return msgs
}
