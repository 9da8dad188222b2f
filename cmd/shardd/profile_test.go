package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shard-dev/shard/client"
	"github.com/shard-dev/shard/protocol"
)

// checkProfile fails t unless the file at path looks like a flushed pprof
// profile (gzip-compressed protobuf) with owner-only permissions.
func checkProfile(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("profile mode %v, want 0600", perm)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Fatalf("profile is %d bytes without the gzip header: not flushed", len(data))
	}
}

func TestWriteHeapProfile(t *testing.T) {
	if err := writeHeapProfile(""); err != nil {
		t.Fatalf("empty path: %v, want a no-op", err)
	}
	// An existing, world-readable file is truncated and made owner-only.
	path := filepath.Join(t.TempDir(), "heap.prof")
	if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeHeapProfile(path); err != nil {
		t.Fatal(err)
	}
	checkProfile(t, path)
	if err := writeHeapProfile(filepath.Join(t.TempDir(), "missing", "heap.prof")); err == nil {
		t.Fatal("an unwritable path was accepted")
	}
}

func TestStartCPUProfile(t *testing.T) {
	stop, err := startCPUProfile("")
	if err != nil || stop() != nil {
		t.Fatalf("empty path: %v, want a no-op", err)
	}

	// An existing, world-readable file is truncated and made owner-only.
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop, err = startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkProfile(t, path)

	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.prof")); err == nil {
		t.Fatal("an unwritable path was accepted")
	}
}

// TestServeWritesCPUProfile runs the daemon in-process with SHARD_CPUPROFILE
// set, shuts it down cleanly over its socket and expects the flushed
// profile.
func TestServeWritesCPUProfile(t *testing.T) {
	dir, err := os.MkdirTemp("", "shp") // short: sun_path holds 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	prof := filepath.Join(dir, "daemon.prof")
	t.Setenv("SHARD_HOME", home)
	t.Setenv(cpuProfileEnv, prof)

	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), []string{"--web-port", "0"}, bytes.NewReader(nil), io.Discard, io.Discard)
	}()
	var c *client.Conn
	for deadline := time.Now().Add(20 * time.Second); ; {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		c, err = client.Dial(ctx, filepath.Join(home, "daemon.sock"))
		cancel()
		if err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("shardd exited before accepting clients: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("shardd not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := c.Call(ctx, &protocol.DaemonShutdown{Header: protocol.Header{Type: protocol.TypeDaemonShutdown}}, nil); err != nil {
		t.Fatalf("daemon.shutdown: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shardd: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("shardd did not exit after daemon.shutdown")
	}
	checkProfile(t, prof)
}
