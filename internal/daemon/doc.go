// Package daemon assembles a running shardd from its parts — store, actor
// system, registry, gateway — in that order, and takes it apart in reverse.
// cmd/shardd is the composition root that reads flags and the environment;
// it hands a validated config to New, so tests can run a whole daemon
// in-process on a temporary home with real sockets.
package daemon
