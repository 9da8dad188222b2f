package main

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// notifySocketEnv names the service manager's notification socket
// (systemd's sd_notify protocol, used by Type=notify units).
const notifySocketEnv = "NOTIFY_SOCKET"

// sdNotify sends one notification (newline-separated VAR=value pairs, such
// as "READY=1" or "STOPPING=1") to the service manager listening on socket,
// a unix datagram socket: a filesystem path, or a name starting with '@' for
// the abstract namespace (Go's net package maps the leading '@' to the NUL
// byte of an abstract address). An empty socket means shardd does not run
// under a service manager: nothing is sent. It implements the protocol of
// sd_notify(3) without libsystemd.
func sdNotify(socket, state string) error {
	if socket == "" {
		return nil
	}
	if !strings.HasPrefix(socket, "/") && !strings.HasPrefix(socket, "@") {
		return fmt.Errorf("%s=%q: only unix socket paths and abstract names are supported", notifySocketEnv, socket)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify service manager: %w", err)
	}
	defer conn.Close()
	// A datagram is delivered whole or not at all; the deadline only
	// guards against a receiver whose queue is full.
	if err := conn.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
		return fmt.Errorf("notify service manager: %w", err)
	}
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify service manager: %w", err)
	}
	return nil
}

// withoutEnv returns env without the variable key, so that runtime
// children do not inherit the daemon's service-manager socket.
func withoutEnv(env []string, key string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}
