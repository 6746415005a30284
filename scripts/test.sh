#!/usr/bin/env bash
# make test: every check and test, in two lanes that run side by side,
# each phase timed, so a newcomer sees where the time goes.
#   checks:  vet, staticcheck and unparam, the cross-OS builds, the arm64
#            binary and tests, gofmt, the alert rules, the chart, then
#            go test ./... (privileged tests included: run as root), then
#            the rule ledger's breaks (make rules), then the boot test of
#            internal/dev/kernels
#   kernels: the kernel matrix, one Debian kernel after another (it
#            starts at once), then each fuzz target for 10 s; make
#            test-kernels-more boots the rest (.ci/run runs it after this)
# The generated eBPF objects are checked first, before either lane builds
# from them. A failed phase does not stop its lane: the summary lists
# every phase, and the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
KERNELS=${KERNELS:-5.10,arm64-6.12,newest}
BLIND=${BLIND:-}
# Every package of go.work's modules (the Makefile's PKGS).
PKGS=${PKGS:-$("$MAKE" -s --no-print-directory print-pkgs)}
# Each limit is at least twice the phase's time measured beside a busy
# loop on a 2-CPU machine (BENCHMARKS.md, "make test").
GO_TEST_TIMEOUT=${GO_TEST_TIMEOUT:-40m}
GO_TEST_PARALLEL=${GO_TEST_PARALLEL:-4}
BOOT_TEST_TIMEOUT=${BOOT_TEST_TIMEOUT:-20m}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

# phase LANE NAME CMD...: runs CMD with its lines prefixed by the lane,
# and records its outcome and time.
phase() {
	local lane=$1 name=$2 start=$SECONDS rc
	shift 2
	local log=$results/log.$lane.${name//[^a-zA-Z0-9]/_}
	echo "[$lane] == $name"
	"$@" 2>&1 | sed -u "s/^/[$lane] /" | tee "$log"
	rc=${PIPESTATUS[0]}
	local took=$((SECONDS - start)) outcome=ok
	[ "$rc" -eq 0 ] || outcome=FAILED
	echo "[$lane] == $name: $outcome in ${took}s"
	printf '%s\t%s\t%s\t%s\t%s\n' "$lane" "$name" "$outcome" "$took" "$log" >>"$results/phases"
	return "$rc"
}

checks() {
	for t in vet lint cross arm64 fmt-check checkrules chart; do
		phase checks "$t" "$MAKE" --no-print-directory "$t"
	done
	# Every package's tests but the boot test, which runs last. Four
	# parallel tests a package where GOMAXPROCS (2) would allow two: the
	# end-to-end tests, which are most of this phase, mostly wait on
	# the agent's timers and the kernel's (the guests run them four at
	# a time under emulation).
	# shellcheck disable=SC2086 # PKGS is a list of patterns
	phase checks "go test ./..." "$GO" test -count=1 -parallel "$GO_TEST_PARALLEL" -timeout "$GO_TEST_TIMEOUT" -skip '^TestBootFromAnyCheckout$' $PKGS
	# Each rule of the ledger against its break (docs/rules.md).
	phase checks rules "$MAKE" --no-print-directory rules
	# The boot test boots 5.10 beside the matrix's guest, once the
	# lane's other work is done: at the head of the kernels lane it held
	# back the matrix, the critical path, by two minutes.
	phase checks "boot test" "$GO" test -count=1 -timeout "$BOOT_TEST_TIMEOUT" -run '^TestBootFromAnyCheckout$' ./internal/dev/kernels/
}

kernels() {
	# The first kernel downloads, then the others (network, not CPU)
	# while the matrix boots the first (it boots each kernel once it is
	# fetched, and waits for the cache this fetch holds).
	phase kernels "fetch 5.10" "$GO" run ./internal/dev/kernels/cmd/nwkernels fetch --kernels 5.10
	phase kernels "fetch $KERNELS" "$GO" run ./internal/dev/kernels/cmd/nwkernels fetch --kernels "$KERNELS" &
	local f=$!
	phase kernels "matrix ($KERNELS)" "$GO" run ./internal/dev/kernels/cmd/nwkernels run --kernels "$KERNELS" --blind "$BLIND" --host probe --readme docs/kernels.md
	wait "$f"
	# Each fuzz target for a bounded time, on one CPU, once the guests
	# are done: in the checks lane, after the rule ledger, it made that
	# lane the longer one (1,948 s against the kernels' 1,431, fuzz 241 s
	# of it, beside a busy loop).
	phase kernels fuzz "$MAKE" --no-print-directory fuzz
}

# What the tracked files hold before the tests: a test run must leave
# them as it found them (generated tables are checked, and written only
# by targets meant for it: make kernels-readme, make manifests).
tracked() { git diff HEAD 2>/dev/null | sha256sum; }
before=$(tracked)

start=$SECONDS
phase setup "generated eBPF objects" "$MAKE" --no-print-directory check-generate
checks &
c=$!
kernels &
k=$!
wait "$c" "$k"
unchanged() {
	[ "$(tracked)" = "$before" ] && return 0
	echo "the tests changed tracked files (git diff shows what):"
	git status --short --untracked-files=no
	return 1
}
phase setup "tracked files unchanged" unchanged

echo
echo "make test: where the time went (wall time $((SECONDS - start))s)"
printf '| lane | phase | outcome | seconds |\n|---|---|---|---|\n'
failed=0
while IFS=$'\t' read -r lane name outcome took log; do
	printf '| %s | %s | %s | %s |\n' "$lane" "$name" "$outcome" "$took"
	[ "$outcome" = ok ] || failed=1
done <"$results/phases"
# A failed phase's output is interleaved with the other lane's: its last
# lines again, on their own, last, so that a log's tail says why.
while IFS=$'\t' read -r lane name outcome took log; do
	[ "$outcome" = ok ] && continue
	echo
	echo "== $lane: $name FAILED; its last lines:"
	grep -v '^\[[a-z]*\] \(ok\|PASS\|=== RUN\|--- PASS\|=== PAUSE\|=== CONT\)' "$log" | tail -n 25
done <"$results/phases"
exit "$failed"
