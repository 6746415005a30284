#!/usr/bin/env bash
# Installs what building and testing neighwatch needs on a fresh Debian
# machine: only the packages that are missing, so it is quick when run again.
set -euo pipefail

pkgs=(
  clang llvm libbpf-dev bpftool   # eBPF programs (bpf2go)
  iproute2 util-linux             # lab and tests (ip, setpriv)
  iputils-ping                    # the lab walkthrough's traffic (tests send their own)
  prometheus                      # promtool, and the server the alert tests run
  prometheus-alertmanager         # the alert tests' Alertmanager
  keepalived                      # the VRRP precision scenarios (in namespaces)
  qemu-user                       # make arm64: the arm64 binary and tests under qemu-aarch64
  podman runc                     # make image and the image tests (podman --runtime runc)
  docker-registry                 # the publish test's local OCI registry, and the cluster's
  containerd containernetworking-plugins  # make test-cluster: the node's runtime and its pod network
  systemd                         # systemd-analyze verify of the unit after make install
  qemu-system-x86 busybox-static  # the kernel matrix (make test-kernels): Debian's kernels under qemu
  qemu-system-arm                 # ... its arm64 guests (qemu-system-aarch64)
  kmod xz-utils zstd              # ... their modules: depmod, modprobe, xz and zstd for Debian 13's and later
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
# The prometheus and registry packages start servers on install; the
# tests run their own, so stop them where systemd runs.
for svc in prometheus prometheus-alertmanager docker-registry; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
  fi
done
go mod download
