package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Events writes a server-sent event stream and flushes every event, so the
// client sees each one when the test sends it. It belongs to one handler.
type Events struct {
	w http.ResponseWriter
}

// SSE answers 200 with an event stream and flushes the header, so the
// client's request returns before the first event.
func SSE(w http.ResponseWriter) *Events {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush(w)
	return &Events{w: w}
}

// Event writes one event: an "event:" line when name is set (Anthropic and
// Responses name theirs, chat completions does not), then the data line,
// JSON-encoded unless data is a string already (such as "[DONE]").
func (e *Events) Event(name string, data any) {
	payload, ok := data.(string)
	if !ok {
		raw, err := json.Marshal(data)
		if err != nil {
			panic(fmt.Sprintf("fakellm: marshal event: %v", err))
		}
		payload = string(raw)
	}
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: " + payload + "\n\n")
	if _, err := io.WriteString(e.w, b.String()); err != nil {
		return // the client went away; the test sees it from its side
	}
	flush(e.w)
}

// Comment writes an SSE comment line, which services send as a keep-alive
// and clients must skip.
func (e *Events) Comment(text string) {
	_, _ = io.WriteString(e.w, ": "+text+"\n\n")
	flush(e.w)
}

// Disconnect drops the connection in the middle of an answer, with no
// terminating event: the client sees the body end unexpectedly. Call it
// from a Handler; it does not return.
func Disconnect() {
	panic(http.ErrAbortHandler)
}

// JSONError answers with an HTTP error status and body as it is, which may
// be a service's error object or, as from a proxy, not JSON at all.
func JSONError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// Hold blocks a Handler until release is closed or the client has gone
// (its request's context is done, which Server.Close also causes). It
// reports whether release was closed, that is whether the answer may go on.
func Hold(r *http.Request, release <-chan struct{}) bool {
	select {
	case <-release:
		return true
	case <-r.Context().Done():
		return false
	}
}

func flush(w http.ResponseWriter) {
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}
