#!/usr/bin/env bash
# Reproduces the figures in docs/performance.md: the Google Benchmark programs plus
# end-to-end runs of the kpc binary (wall time, peak RSS) on the 10,000-Service /
# 100,000-endpoint snapshot, and the real iptables-restore loading the same output.
# Usage: scripts/bench.sh [--no-kernel]     (kernel part needs root)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release >/dev/null
B=build/release/bin
OUT=build/bench
mkdir -p "$OUT"
[ -f "$OUT/cluster.json" ] || "$B/kpc-gen-cluster" "$OUT/cluster"
ls -l "$OUT/cluster.json" "$OUT/cluster.yaml"

echo "== Google Benchmark"
"$B/kpc_bench_snapshot" --benchmark_counters_tabular=true

measure() {  # label, command...
  local label=$1; shift
  /usr/bin/time -f "$label: %e s wall, %M KB max RSS" "$@" >/dev/null 2>"$OUT/time.txt" || true
  grep -E "wall" "$OUT/time.txt"
}
echo "== End to end (kpc binary, one core)"
measure "kpc validate cluster.json" "$B/kpc" validate -q "$OUT/cluster.json"
measure "kpc validate cluster.yaml" "$B/kpc" validate -q "$OUT/cluster.yaml"
measure "kpc compile cluster.json (full)" "$B/kpc" compile "$OUT/cluster.json" -o "$OUT/full.restore"
"$B/kpc" compile "$OUT/cluster.json" -o "$OUT/full.restore" --stats

echo "== The nft model at 10,000 Services (docs/performance.md, \"nft model at 10,000 Services\")"
"$B/kpc_bench_nft_model"
"$B/kpc" compile "$OUT/cluster.json" --backend nftables -o "$OUT/full.nft"
measure "kpc simulate --backend nftables full.nft" "$B/kpc" simulate --backend nftables "$OUT/full.nft" -o "$OUT/full.list"
measure "kpc simulate --backend nftables --state full.list (re-print)" \
  "$B/kpc" simulate --backend nftables --state "$OUT/full.list" -o /dev/null

echo "== The IPVS back end at 10,000 Services (docs/performance.md, issue 17)"
"$B/kpc_bench_ipvs"
measure "kpc compile cluster.json --backend ipvs" "$B/kpc" compile "$OUT/cluster.json" --backend ipvs -o "$OUT/ipvs"

if [ "${1:-}" != "--no-kernel" ] && [ "$(id -u)" = 0 ]; then
  echo "== Real iptables-restore loading the same program (fresh namespace)"
  ns=kpc-bench-$$
  ip netns add "$ns"
  trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
  ip netns exec "$ns" nfacct add ct_state_invalid_dropped_pkts >/dev/null
  ip netns exec "$ns" nfacct add localhost_nps_accepted_pkts >/dev/null
  /usr/bin/time -f "iptables-legacy-restore: %e s wall, %M KB max RSS" \
    ip netns exec "$ns" iptables-legacy-restore --noflush <"$OUT/full.restore"
  /usr/bin/time -f "iptables-legacy-save: %e s wall" ip netns exec "$ns" iptables-legacy-save >/dev/null
fi
