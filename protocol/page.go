package protocol

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// Paging of the lists a person looks at (docs/protocol.md §13, "Paged
// lists"). agent.list and jobs.list take an optional limit and an opaque
// cursor; the answer carries next_cursor while more remain. A cursor names
// the last item a page held by its sort key, never by position, so an item
// added or removed between pages neither repeats nor skips another. Without
// limit and cursor the answer is the whole list, as before paging existed.

// CursorKind tells which list a cursor belongs to: one list's cursor given
// to the other is refused rather than misread.
type CursorKind string

// The lists that page.
const (
	CursorAgents CursorKind = "a"
	CursorJobs   CursorKind = "j"
)

// MaxCursorLen bounds a cursor: it holds one id and one time.
const MaxCursorLen = 256

// Cursor is a decoded cursor: the sort key of the last item of a page.
// At is the item's created_at (0 where the list sorts by id alone).
type Cursor struct {
	Kind CursorKind
	At   int64
	ID   string
}

// Encode returns the opaque wire form of c. Clients pass it back
// unchanged; nothing may parse meaning out of it.
func (c Cursor) Encode() string {
	raw := string(c.Kind) + "." + strconv.FormatInt(c.At, 10) + "." + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeCursor parses a cursor of the given kind. A cursor that is not one
// this daemon minted for that list is INVALID_REQUEST naming field cursor.
func DecodeCursor(kind CursorKind, s string) (Cursor, error) {
	if len(s) > MaxCursorLen {
		return Cursor{}, invalid("cursor", "longer than %d bytes", MaxCursorLen)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, invalid("cursor", "malformed")
	}
	k, rest, ok1 := strings.Cut(string(b), ".")
	at, id, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || id == "" {
		return Cursor{}, invalid("cursor", "malformed")
	}
	if CursorKind(k) != kind {
		return Cursor{}, invalid("cursor", "not a cursor of this list")
	}
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil || n < 0 {
		return Cursor{}, invalid("cursor", "malformed")
	}
	return Cursor{Kind: kind, At: n, ID: id}, nil
}

// checkPage validates a list command's limit and cursor.
func checkPage(kind CursorKind, limit int, cursor string) error {
	if limit < 0 {
		return invalid("limit", "must not be negative")
	}
	if cursor != "" {
		if _, err := DecodeCursor(kind, cursor); err != nil {
			return err
		}
	}
	return nil
}
