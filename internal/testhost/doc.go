// Package testhost is what a test may take from the machine it runs on,
// and the one place the suite says so.
//
// Tools. A test that runs git, tmux, Chromium, a third-party agent or a
// base utility asks Tool for it (or calls Missing when it looks the tool up
// itself). A missing tool skips the test with a message that names the
// tool and what installs it. With SHARD_TEST_STRICT=1 in the environment,
// which .ci/run sets, the same message fails the test instead: a CI machine
// where an install step failed goes red, not green with the tests gone.
// Skip is for the skips that are not about the machine (an opt-in soak
// run, -short, a test that needs root): they skip in strict mode too.
//
// The skip log. With SHARD_TEST_SKIPLOG naming a file, every skip made
// here appends one line, "<package dir> <test>: <reason>", so .ci/run can
// end by saying what did not run. The test binaries of `go test ./...` run
// in parallel; each line is one O_APPEND write, so lines never interleave.
//
// Homes. IsolateHome, called from a TestMain, gives the test binary, and so
// every process it starts, an empty home of its own: no test reads the
// developer's ~/.gitconfig or ~/.shard, and a test that leans on one fails
// on every machine, not only on a fresh one. A repository a test makes
// therefore sets its own identity, as a user's repository would.
package testhost
