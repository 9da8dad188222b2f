package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

// TestErrorfWrapKeepsChain: %w keeps the cause reachable through Unwrap
// while the message reads exactly as %v would print it.
func TestErrorfWrapKeepsChain(t *testing.T) {
	cause := fmt.Errorf("open session: %w", fs.ErrNotExist)
	wrapped := Errorf(CodeInternal, "replay the session: %w", cause)
	printed := Errorf(CodeInternal, "replay the session: %v", cause)

	if wrapped.Message != printed.Message {
		t.Errorf("message with %%w = %q, with %%v = %q; want the same text", wrapped.Message, printed.Message)
	}
	if !errors.Is(wrapped, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false; want the chain kept", wrapped)
	}
	if errors.Is(printed, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = true for %%v; want no chain", printed)
	}
	if printed.Unwrap() != nil {
		t.Errorf("Unwrap of a %%v error = %v; want nil", printed.Unwrap())
	}
	if got := CodeOf(fmt.Errorf("gateway: %w", wrapped)); got != CodeInternal {
		t.Errorf("CodeOf through fmt wrapping = %q; want %q", got, CodeInternal)
	}
}

// TestErrorfOuterCodeWins: a protocol error wrapping another keeps its own
// code; the inner one stays reachable.
func TestErrorfOuterCodeWins(t *testing.T) {
	inner := Errorf(CodeNotFound, "no agent %s", "a-1")
	outer := Errorf(CodeConflict, "relaunch: %w", inner)
	if got := CodeOf(outer); got != CodeConflict {
		t.Errorf("CodeOf(outer) = %q; want %q", got, CodeConflict)
	}
	var pe *Error
	if !errors.As(outer.Unwrap(), &pe) || pe.Code != CodeNotFound {
		t.Errorf("errors.As(outer.Unwrap()) = %v; want the NOT_FOUND error", pe)
	}
	if got := CodeOf(fmt.Errorf("x: %w", outer)); got != CodeConflict {
		t.Errorf("CodeOf(fmt wrap of outer) = %q; want %q", got, CodeConflict)
	}
}

// TestErrorCauseNotEncoded: the wire object of an error with a cause is the
// same as one without; the cause never reaches JSON.
func TestErrorCauseNotEncoded(t *testing.T) {
	cause := errors.New("disk on fire: secret detail")
	for _, e := range []*Error{
		Errorf(CodeInternal, "write the fork: %w", cause),
		AsError(Errorf(CodeInternal, "write the fork: %w", cause)),
		AsError(fmt.Errorf("actor: %w", Errorf(CodeInternal, "write the fork: %w", cause))),
	} {
		got, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"code":"INTERNAL_ERROR","message":"write the fork: disk on fire: secret detail"}`
		if string(got) != want {
			t.Errorf("json = %s; want %s", got, want)
		}
		var back Error
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if back.Unwrap() != nil {
			t.Errorf("decoded error has cause %v; want none", back.Unwrap())
		}
	}
}
