#!/usr/bin/env bash
# Installs what building and testing neighwatch needs on a fresh Debian
# machine: only the packages that are missing, so it is quick when run again.
set -euo pipefail

pkgs=(
  clang llvm libbpf-dev bpftool   # eBPF programs (bpf2go)
  iproute2 util-linux             # lab and tests (ip, setpriv)
  iputils-ping                    # the lab walkthrough's traffic (tests send their own)
  prometheus                      # promtool: metrics and rules linting
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The prometheus package starts a server on install; neighwatch needs only
# promtool, so stop it where systemd runs.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl stop prometheus || true
fi
go mod download
