// Package daemon is shardd's composition root: the one place that knows
// every part and wires them — store, actor system, the registry and the
// jobs coordinator as siblings under root, the gateway — in that order, and
// takes them apart in reverse. It is internal: cmd/shardd (which reads flags
// and the environment) and the tests are its only users; cmd/shardd hands
// it a validated config, so tests run a whole daemon in-process on a
// temporary home with real sockets.
package daemon
