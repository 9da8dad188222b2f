// Package actortest is the test kit for actor-level tests: a probe actor
// that stands in for whatever an actor under test talks to (a connection,
// its parent, a job holder) and records every message it receives; readers
// of the records an actor pushes to a connection's outbox or to the Hub;
// and the real runtime binary (./cmd/shardd, run as `shardd agent
// --headless`), built once per test binary by Main.
//
// Every wait here is on a signal (a message, a record, a process state),
// bounded by Timeout, after which the test fails: nothing sleeps for a
// guessed duration.
package actortest
