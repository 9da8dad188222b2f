package main

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// listenNotify listens like a service manager on a unix datagram socket.
func listenNotify(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

func TestSdNotifyPathSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "sdn") // short: sun_path holds 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify")
	conn := listenNotify(t, sock)
	if err := sdNotify(sock, "READY=1\nSTATUS=up"); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, conn); got != "READY=1\nSTATUS=up" {
		t.Fatalf("received %q", got)
	}
}

func TestSdNotifyAbstractSocket(t *testing.T) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := "@shard-test-" + hex.EncodeToString(b)
	conn := listenNotify(t, name)
	if err := sdNotify(name, "STOPPING=1"); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, conn); got != "STOPPING=1" {
		t.Fatalf("received %q", got)
	}
}

func TestSdNotifyWithoutSocketOrBadSocket(t *testing.T) {
	if err := sdNotify("", "READY=1"); err != nil {
		t.Fatalf("no NOTIFY_SOCKET: %v, want a silent no-op", err)
	}
	if err := sdNotify("vsock:2:1234", "READY=1"); err == nil {
		t.Fatal("a vsock address was accepted")
	}
	if err := sdNotify(filepath.Join(t.TempDir(), "absent"), "READY=1"); err == nil {
		t.Fatal("a missing socket gave no error")
	}
	env := withoutEnv([]string{"A=1", "NOTIFY_SOCKET=/run/x", "NOTIFY_SOCKETS=2"}, notifySocketEnv)
	if len(env) != 2 || env[0] != "A=1" || env[1] != "NOTIFY_SOCKETS=2" {
		t.Fatalf("withoutEnv = %q", env)
	}
}
