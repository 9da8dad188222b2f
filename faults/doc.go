// Package faults is Shard's fault suite: black-box tests that build the real
// shardd and shardctl executables (in TestMain, like package e2e), run the
// daemon on a private SHARD_HOME and hurt it the ways production will.
//
// Each scenario is its own test and asserts behaviour, not only survival:
//
//	TestKillDaemonUnderLoad     SIGKILL of shardd while clients create jobs (single, parallel,
//	                            chain) and prompt, in a loop; after each restart: bbolt checks
//	                            clean, no acknowledged job or run is lost, runs left starting or
//	                            active are interrupted (chains halted, nothing else changed), no
//	                            process of the old generation survives, tools' included
//	TestRuntimeCrashes          runtimes SIGKILLed at random under load: agent_exited and an
//	                            error event reach clients, runs end failed, the next prompt
//	                            restarts the runtime, nothing the dead runtime started survives
//	TestSlowConsumer            clients that stop reading while an agent floods are dropped
//	                            (docs/protocol.md §13, P2: fatal "slow consumer", close), a
//	                            reading client gets every event, memory stays within the caps
//	TestReconnectStorm          200 clients attach and drop repeatedly on both transports;
//	                            connection, attachment and goroutine counts return to baseline
//	TestMalformedClientFrames   bad JSON, unknown types, wrong field types, binary and oversized
//	                            records on both transports: INVALID_REQUEST (or the WebSocket
//	                            close 1009), the connection stays usable, a bystander sees nothing
//	TestMalformedRuntimeOutput  a runtime writing garbage, truncated records, nothing but garbage:
//	                            clients only ever see valid records, exits and failed starts are
//	                            reported as docs/protocol.md §10.2 says
//	TestDiskFull                RLIMIT_FSIZE pins shard.db: commits fail as INTERNAL_ERROR with no
//	                            trace, the daemon survives SIGXFSZ and keeps serving, and after a
//	                            crash and a restart without the limit every acknowledged record
//	                            is there and nothing runs untracked
//	TestSoak                    -soak <duration> only: a mixed workload with daemon SIGKILLs and
//	                            jobs.retention on (-soak-retention), watching RSS, goroutines
//	                            and open fds for unbounded growth within each daemon lifetime
//	                            and across them (growthRule, pinned by TestGrowthRule)
//
// The bounded versions run in `go test ./...`. Longer runs:
//
//	go test ./faults -run KillDaemon -rounds 30 -v      # 30 SIGKILL rounds
//	go test ./faults -run Soak -soak 2h -timeout 3h -v  # -soak-restart, -soak-sample tune it;
//	                                                     # -soak-csv, -soak-heap, -soak-workers record and narrow it
//
// Every randomized test logs its seed; -seed repeats a run. SHARD_FAULTS_RACE=1
// builds the binaries with -race; SHARD_FAULTS_BUILD_FLAGS adds go build flags
// (an -overlay runs the suite against a variant of the daemon).
//
// The package contains no non-test code. The tests need Linux: they read
// /proc for process trees, environments, RSS and file descriptors.
package faults
