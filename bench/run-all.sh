#!/usr/bin/env bash
# Full benchmark run behind BENCHMARKS.md: every scenario at its full sizes,
# one after the other, against one shardd built from this checkout. Results
# (JSON, PNG plots, CPU profile tops, the printed tables) go to $OUT
# (default docs/bench). Takes about 15 minutes on 2 cores; run it on a quiet
# machine — these are measurements, nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-docs/bench}"
mkdir -p "$OUT"
BIN="$(mktemp -d)"
trap 'rm -rf "$BIN"' EXIT
go build -o "$BIN/shardd" ./cmd/shardd
run() {
	local name="$1"; shift
	echo "==== go run ./bench $*" | tee "$OUT/$name.txt"
	go run ./bench "$@" --shardd "$BIN/shardd" --out "$OUT/$name.json" --plots "$OUT" 2>&1 | tee -a "$OUT/$name.txt" ||
		echo "==== $name failed" | tee -a "$OUT/$name.txt"
}
# The relay's reading client decodes every record (as the baseline's does)
# and is slower than the daemon: a flood much longer than the outbox cap
# (10,000 records; docs/protocol.md §13, P2) gets it dropped as a slow consumer,
# so the full run keeps floods at 20,000 deltas and repeats them.
run relay          relay --n 20000 --cpuprofile "$OUT/relay.pprof"
run fanout         fanout --cpuprofile "$OUT/fanout.pprof"
run jobs           jobs
run jobs-held-back jobs --phases create --max-active 1 --creates 400
run resync         resync --windows 10,1000,10000
run scale          scale --agents 100,500,1000
run workspace      workspace --files 10000
# 1,000,000 jobs is the history target's size: filling that store takes
# about a minute and 2.7 GB of disk (--history 1000,10000,100000 for a short run).
run history        history --history 1000,10000,100000,1000000
# A single shardd against clusters of 2 and 3 nodes on this machine: creates,
# wake-up, live agents per node count (cluster-live.svg), cross-node attach.
run cluster        cluster
rm -f "$OUT"/*.pprof
