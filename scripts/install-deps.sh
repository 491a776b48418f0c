#!/usr/bin/env bash
# Installs every Debian package kpc needs to build, test and benchmark.
# Idempotent: packages already installed are skipped, so a warm machine does nothing.
# Usage: scripts/install-deps.sh          (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake ninja-build pkg-config ccache
  # libraries (found with find_package / pkg-config in CMakeLists.txt)
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev libre2-dev libnftnl-dev libmnl-dev
  libip4tc-dev libip6tc-dev librapidcheck-dev libgtest-dev libgmock-dev libbenchmark-dev
  # the allocator kpc's programs run on (KPC_MIMALLOC; docs/performance.md, "The allocator")
  libmimalloc-dev
  # kpc-applier's Kubernetes API client (HTTPS)
  libcurl4-openssl-dev
  # kpc-applier --apply-with in-process: libnftables, the library the nft tool is built on
  libnftables-dev
  # fuzzing / sanitizers (clang with libFuzzer and the ASan/UBSan runtimes)
  clang libclang-rt-14-dev
  # the real netfilter tools the kernel tests drive
  iptables nftables nfacct ipset ipvsadm iproute2
  # schema tests; the applier's local HTTPS API test server (tests/support/kube_api_server.py)
  # and the certificates it is given (openssl)
  python3 python3-jsonschema python3-yaml openssl
  # the CLI tests bound time and memory with timeout (coreutils) and prlimit (util-linux)
  coreutils util-linux
  # the generated man pages render without warnings (groff), the zsh completion parses (zsh -n)
  groff-base zsh
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Try without a package-list refresh first (fast on machines with fresh lists); refresh on failure.
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
