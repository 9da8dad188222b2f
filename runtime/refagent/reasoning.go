package refagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/shard-dev/shard/protocol"
)

// Reasoning levels are session-scoped (docs/protocol.md §9.2): the level a
// client selected is kept in reasoning.json (0600) in the session
// directory, next to the transcript, so that a runtime restarted on the
// session (idle reaping, a kill, a daemon restart) runs with it again.
//
// The file holds the explicit selection only ({"level":"high"}; an empty
// level is the model's default). It is written, synced and renamed into
// place before set_reasoning_level is answered (persist before
// acknowledge), and again when a set_model drops a level the new model
// does not offer. A restored level the active model does not offer (the
// model changed meanwhile) is the model's default. A file that cannot be
// read selects nothing: the level is a preference, not a grant.
const reasoningFileName = "reasoning.json"

// reasoningRecord is the content of reasoning.json.
type reasoningRecord struct {
	Level string `json:"level"`
}

// loadReasoning returns the level saved in dir, "" when there is none.
func loadReasoning(dir string, log *slog.Logger) string {
	if dir == "" {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(dir, reasoningFileName))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	var rec reasoningRecord
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil {
		log.Warn("ignoring an unreadable reasoning selection", slog.Any("err", err))
		return ""
	}
	return rec.Level
}

// saveReasoning makes level the saved selection of dir (a no-op without a
// session directory). It syncs, so it must run without runtime.mu.
func saveReasoning(dir, level string) error {
	if dir == "" {
		return nil
	}
	data, err := json.Marshal(reasoningRecord{Level: level})
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, reasoningFileName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("agent: save reasoning level: %w", err)
	}
	_, werr := f.Write(append(data, '\n'))
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, filepath.Join(dir, reasoningFileName))
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("agent: save reasoning level: %w", werr)
	}
	syncDir(dir)
	return nil
}

// setReasoning handles set_reasoning_level: checked under mu, saved
// without it, then applied and announced under mu again. Commands are
// handled one at a time (readLoop), so nothing else changes the selection
// in between; a turn reads the level at its next provider call.
func (r *runtime) setReasoning(h protocol.Header, model, effort string) {
	r.mu.Lock()
	if r.out.isHung() {
		r.mu.Unlock()
		return
	}
	if err := r.sel.checkReasoningLocked(model, effort); err != nil || r.sel.reasoning == effort {
		r.sel.setReasoningLocked(h, model, effort) // answers the error, or the idempotent set
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.saveReasoningThen(h, effort, func() { r.sel.setReasoningLocked(h, model, effort) })
}

// setModel handles set_model. When the switch drops the selected
// reasoning level (the new model does not offer it), the dropped level is
// saved first, as setReasoning saves a new one.
func (r *runtime) setModel(h protocol.Header, sel string) {
	r.mu.Lock()
	if r.out.isHung() {
		r.mu.Unlock()
		return
	}
	if !r.sel.dropsReasoningLocked(sel) {
		r.sel.setModelLocked(h, sel)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.saveReasoningThen(h, "", func() { r.sel.setModelLocked(h, sel) })
}

// saveReasoningThen saves effort as the session's level without mu, then,
// under mu, runs apply — or answers h INTERNAL_ERROR when the save failed.
// Called without mu.
func (r *runtime) saveReasoningThen(h protocol.Header, effort string, apply func()) {
	err := saveReasoning(r.opts.SessionDir, effort)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out.isHung() {
		return
	}
	if err != nil {
		r.log.Error("reasoning level not saved", slog.Any("err", err))
		r.out.respondErr(h, protocol.Errorf(protocol.CodeInternal, "save the reasoning level: %s", err))
		return
	}
	apply()
}
