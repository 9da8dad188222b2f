// Package config turns shardd's four configuration layers into one validated
// Config value, so that no other package ever reads a flag, an environment
// variable or a file to learn how to behave.
//
// The layers, lowest first:
//
//	defaults < config file (<home>/config.yaml) < SHARD_* environment < flags
//
// Every setting has a dotted snake_case key (kill.abort_grace) and is
// reachable three ways: nested in config.yaml (kill: {abort_grace: 5s}), as
// the environment variable SHARD_KILL_ABORT_GRACE, and as the flag
// --kill.abort-grace. A few common settings also have short flags
// (--web-host, --web-port, --log-level). Durations use Go syntax (200ms, 10m).
// Only flags the user actually set override lower layers.
//
// Mistakes fail loudly: an unknown key in the file, a value that does not
// parse, or one out of range is an error that names the key and where the
// value came from. Unknown SHARD_* variables are ignored, because the daemon
// hands its runtimes variables such as SHARD_AGENT_ID.
//
// The web.* settings choose loopback or remote mode for the web listener;
// Validate refuses every unsafe or incomplete combination of them, naming
// the flag to set or drop (web.go has the table).
//
// Load reads nothing from the process: the caller passes the parsed flag set,
// the environment and the user's home directory, so only cmd/shardd touches
// os.Args and os.Environ. Components receive the sub-struct they need
// (cfg.Gateway, cfg.Store) rather than the whole Config or viper.
package config
