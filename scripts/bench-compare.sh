#!/usr/bin/env bash
# Compares two builds of neighwatch on the privileged benchmarks of
# BENCHMARKS.md, interleaved in one run (OLD NEW OLD NEW ...) as
# ../shared/docs/benchmarking.md asks: 100k-entry sync, memory and scrape
# (nwbench, both agents in every round), the table and decoder Go
# benchmarks, the event drain and the datapath decision cost.
#   scripts/bench-compare.sh OLD_REV [NEW_REV]     (root; NEW_REV: the working tree)
# Output goes to .bench/compare-*.txt.
set -euo pipefail
old=${1:?usage: bench-compare.sh OLD_REV [NEW_REV]}
new=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/.bench
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; [ -n "$new" ] && git -C "$root" worktree remove --force "$work/new" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -p "$out"
git -C "$root" worktree add --detach "$work/old" "$old" >/dev/null
newdir=$root
if [ -n "$new" ]; then git -C "$root" worktree add --detach "$work/new" "$new" >/dev/null; newdir=$work/new; fi

# pkg DIR NAME...: the first of the packages that exists in a tree (they moved).
pkg() { d=$1; shift; for p; do if [ -d "$d/$p" ]; then echo "./$p"; return; fi; done; }
build() { # DIR TAG
	(cd "$1" && go build -o "$work/$2-neighwatch" ./cmd/neighwatch &&
		go test -c -o "$work/$2-table.test" "$(pkg "$1" table internal/table monitor)" &&
		go test -c -o "$work/$2-mirror.test" "$(pkg "$1" monitor/mirror monitor)" &&
		go test -c -o "$work/$2-bpf.test" ./bpf)
}
build "$work/old" old
build "$newdir" new
(cd "$newdir" && go build -o "$work/nwbench" ./internal/dev/bench/cmd/nwbench)

echo "# nwbench: old $old, new ${new:-working tree}" | tee "$out/compare-nwbench.txt"
"$work/nwbench" run --rounds 11 --entries 1000,100000 --bin "$work/old-neighwatch,$work/new-neighwatch" | tee -a "$out/compare-nwbench.txt"

: >"$out/compare-go-old.txt"; : >"$out/compare-go-new.txt"
for _ in 1 2 3 4 5 6; do
	for tag in old new; do
		(cd "$work" && ./$tag-table.test -test.run '^$' -test.bench 'Apply|Stats' -test.benchmem -test.count 1 &&
			./$tag-mirror.test -test.run '^$' -test.bench 'Decode$' -test.benchmem -test.count 1) | grep '^Benchmark' >>"$out/compare-go-$tag.txt"
	done
done
: >"$out/compare-drain.txt"; : >"$out/compare-decision.txt"
for _ in 1 2; do
	for tag in old new; do
		(cd "$work" && ./$tag-mirror.test -test.run '^$' -test.bench DrainInterleaved -test.benchtime 4x) | sed "s/^Benchmark/$tag:Benchmark/" | grep ':Benchmark' | tee -a "$out/compare-drain.txt"
		(cd "$work" && ./$tag-bpf.test -test.run '^$' -test.bench Decision -test.benchtime 2000x -test.count 2) | sed "s/^Benchmark/$tag:Benchmark/" | grep ':Benchmark' | tee -a "$out/compare-decision.txt"
	done
done
go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da "$out/compare-go-old.txt" "$out/compare-go-new.txt" | tee "$out/compare-go.txt"
