// Command shardctl is the operator's CLI for shardd: it shows the daemon's
// status; lists the models of every configured provider; lists, inspects,
// creates (on any provider), kills and terminates agents; lists and
// describes subagent jobs and their runs, stops, relaunches and waits for
// them; sends a prompt and streams the reply; watches the daemon's or some
// agents' events; attaches to an agent as an interactive terminal client;
// checks a Shard home (doctor); gives a team goals, shows its board,
// answers its decisions and steers its tasks (team); prints shell
// completions; and shuts the daemon down.
//
// It exists so that an operator (or a script, with -o json or -o yaml) can
// inspect and steer the daemon without the web dashboard. It speaks the
// wire protocol over the daemon's unix socket through package client and
// holds no state of its own; every command is one short-lived connection.
// Two commands also read the Shard home directly, for when the daemon is
// down: --offline (jobs ls, jobs show, agents ls) opens shard.db read-only
// through package store, and doctor checks permissions, the database and
// stray processes, and loads the configuration through package config.
//
// Each command lives in its own file as newXCommand plus an options struct
// with AddFlags. Exit codes are listed in the root command's help
// (shardctl --help).
package main
