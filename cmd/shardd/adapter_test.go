package main

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPollableStdinCloseEndsARead: stdin as the daemon gives it (a pipe
// in blocking mode, like the process's own stdin) becomes a file whose
// Close ends a read in progress, which a blocking file's does not; restore
// puts the descriptor back in blocking mode.
func TestPollableStdinCloseEndsARead(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "stdin"), os.NewFile(uintptr(p[1]), "w")
	defer r.Close()
	defer w.Close() // never written: only a close can end the read
	in, restore := pollable(r)
	if in == io.Reader(r) {
		t.Fatal("a pipe was not made pollable")
	}
	got := make(chan error, 1)
	go func() {
		_, err := in.Read(make([]byte, 1))
		got <- err
	}()
	if err := in.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read after close = %v, want os.ErrClosed", err)
		}
	case <-time.After(30 * time.Second): // a failure bound, not a wait
		t.Fatal("closing stdin did not end the read")
	}
	restore()
	if fl, err := unix.FcntlInt(uintptr(p[0]), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("stdin after restore: flags %#x (%v), want blocking", fl, err)
	}
}
