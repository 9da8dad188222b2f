// Package buildlock serializes the test suites' builds of the Shard
// binaries across processes.
//
// `go test ./...` runs at once the packages whose tests build shardd
// (internal/daemon, the actor packages through actortest, e2e, faults,
// bench), and concurrent `go build`s of the same packages do not share
// work: on a clean build cache each one compiled the model SDKs on its own
// (gigabytes of compiler memory and minutes of CPU each), so on a loaded
// 2-core machine a package spent most of its time limit compiling before
// its first test ran. Under the lock the first build fills the build cache
// and the others find it there and only link.
package buildlock
