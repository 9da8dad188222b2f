// Command shardctl is the operator's CLI for a running shardd: it shows the
// daemon's status, lists and creates agents, sends a prompt and streams the
// reply, watches agents' event streams, and shuts the daemon down.
//
// It exists so that an operator (or a script, with -o json) can inspect and
// steer the daemon without the web dashboard. It speaks the wire protocol
// over the daemon's unix socket through package client and holds no state of
// its own; every command is one short-lived connection.
//
// Exit codes are listed in the root command's help (shardctl --help).
package main
