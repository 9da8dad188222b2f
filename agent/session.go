package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/shard-dev/shard/protocol"
)

// sessionFileName is the transcript inside Options.SessionDir.
const sessionFileName = "session.jsonl"

// session appends live-window messages to session.jsonl, one JSON object per
// line, as they enter the window. A nil *session persists nothing. It is
// used under runtime.mu only.
type session struct {
	f *os.File
}

// openSession opens (creating it if needed) the transcript in dir and
// returns the messages it already holds. A final line without its newline is
// a write cut short by a crash: it is kept if it decodes and dropped (and cut
// from the file, so the next append starts on a clean line) if it does not.
// Any other undecodable line is a SESSION_CORRUPT error. dir == "" returns a
// nil session.
func openSession(dir string) (*session, []protocol.Message, error) {
	if dir == "" {
		return nil, nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("agent: create session dir: %w", err)
	}
	path := filepath.Join(dir, sessionFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: open session: %w", err)
	}
	msgs, err := restore(f)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("agent: restore session %s: %w", path, err)
	}
	return &session{f: f}, msgs, nil
}

// restore reads f from the start, repairs a torn last line in place and
// returns the decoded messages.
func restore(f *os.File) ([]protocol.Message, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	msgs, keep, addNewline, err := parseTranscript(data)
	if err != nil {
		return nil, err
	}
	if keep < len(data) {
		if err := f.Truncate(int64(keep)); err != nil {
			return nil, fmt.Errorf("truncate torn line: %w", err)
		}
	}
	if addNewline {
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return nil, fmt.Errorf("repair last line: %w", err)
		}
	}
	return msgs, nil
}

// parseTranscript decodes a session.jsonl image. keep is the length of the
// prefix worth keeping; addNewline reports a decodable final line that lacks
// its '\n'.
func parseTranscript(data []byte) (msgs []protocol.Message, keep int, addNewline bool, err error) {
	msgs = []protocol.Message{}
	for lineNo, start := 1, 0; start < len(data); lineNo++ {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 { // final line without newline
			line := bytes.TrimSpace(data[start:])
			if len(line) == 0 {
				return msgs, start, false, nil
			}
			m, derr := decodeEntry(line)
			if derr != nil {
				return msgs, start, false, nil // torn write: drop it
			}
			return append(msgs, m), len(data), true, nil
		}
		line := bytes.TrimSpace(data[start : start+end])
		start += end + 1
		if len(line) == 0 {
			continue
		}
		m, derr := decodeEntry(line)
		if derr != nil {
			return nil, 0, false, fmt.Errorf("%w: line %d: %w",
				protocol.Errorf(protocol.CodeSessionCorrupt, "session transcript cannot be restored"), lineNo, derr)
		}
		msgs = append(msgs, m)
	}
	return msgs, len(data), false, nil
}

// decodeEntry decodes one transcript line into a live-window message.
func decodeEntry(line []byte) (protocol.Message, error) {
	var m protocol.Message
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("decode message: %w", err)
	}
	if m.ID == "" || (m.Role != roleUser && m.Role != roleAssistant) {
		return m, fmt.Errorf("message without id or with role %q", m.Role)
	}
	if m.Content == nil {
		m.Content = []protocol.ContentBlock{}
	}
	return m, nil
}

// append writes one message as a line.
func (s *session) append(m protocol.Message) error {
	if s == nil {
		return nil
	}
	b, err := protocol.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("agent: append to session: %w", err)
	}
	return nil
}

// close closes the transcript.
func (s *session) close() error {
	if s == nil {
		return nil
	}
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("agent: close session: %w", err)
	}
	return nil
}
