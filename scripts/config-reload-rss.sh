#!/usr/bin/env bash
# The agent's RSS across configuration reloads of a large file and back,
# for two builds side by side (each in a network namespace of its own,
# started, reloaded and measured together): BENCHMARKS.md, "A 1 MiB
# configuration reload". As root:
#   scripts/config-reload-rss.sh OLD_BINARY NEW_BINARY [ROUNDS]
# Each round: the small file; 1 MiB of "e,e,e,..." as exclude-interfaces
# (the ConfigMap's limit); the small file again; the largest list the
# agent takes (256 regexes of 1,000 bytes); the small file again. After
# each file: SIGHUP, 10 s, then VmRSS and whether the reload took.
set -euo pipefail
old=$1 new=$2 rounds=${3:-2}
dir=$(mktemp -d)
names=(old new)
bins=("$old" "$new")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for n in "${names[@]}"; do ip netns del "nwcfg-$n" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT

printf 'remediation: dry-run\n' >"$dir/small.yaml"
{ printf 'exclude-interfaces: "'; head -c $(((1048576 - 64) / 2)) /dev/zero | tr '\0' 'x' | sed 's/x/e,/g'; printf 'e"\n'; } >"$dir/big.yaml"
{ printf 'exclude-interfaces:\n'; for i in $(seq 256); do printf '  - "%s"\n' "$(head -c 1000 /dev/zero | tr '\0' 'e')"; done; } >"$dir/list.yaml"
ls -l "$dir"/*.yaml >&2

for i in 0 1; do
	n=${names[$i]}
	ip netns add "nwcfg-$n"
	ip -n "nwcfg-$n" link set lo up
	cp "$dir/small.yaml" "$dir/$n.yaml"
	ip netns exec "nwcfg-$n" "${bins[$i]}" agent --config.file "$dir/$n.yaml" --tracer off \
		--metrics.listen 127.0.0.1:9947 --control.socket "$dir/$n.sock" >"$dir/$n.log" 2>&1 &
	pids+=($!)
done
sleep 5

rss() { awk '/^VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status" 2>/dev/null || echo gone; }
ok() { ip netns exec "nwcfg-$1" curl -s 127.0.0.1:9947/metrics | awk '/^neighwatch_config_last_reload_successful / {print $2}'; }

printf '| round | file | old: RSS MiB | old: reload ok | new: RSS MiB | new: reload ok |\n|---|---|---|---|---|---|\n'
printf '| - | start (small) | %s | | %s | |\n' "$(rss "${pids[0]}")" "$(rss "${pids[1]}")"
for r in $(seq "$rounds"); do
	for f in big small list small; do
		for n in "${names[@]}"; do cp "$dir/$f.yaml" "$dir/$n.yaml"; done
		kill -HUP "${pids[@]}"
		sleep 10
		printf '| %s | %s | %s | %s | %s | %s |\n' "$r" "$f" "$(rss "${pids[0]}")" "$(ok old)" "$(rss "${pids[1]}")" "$(ok new)"
	done
done
hwm() { awk '/^VmHWM/ {printf "%.1f", $2/1024}' "/proc/$1/status" 2>/dev/null || echo gone; }
printf '| peak (VmHWM) | | %s | | %s | |\n' "$(hwm "${pids[0]}")" "$(hwm "${pids[1]}")"
for n in "${names[@]}"; do echo "== $n: reload lines" >&2; grep -c "reload" "$dir/$n.log" >&2 || true; grep "reload failed" "$dir/$n.log" | head -2 | cut -c1-300 >&2 || true; done
