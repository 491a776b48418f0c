#!/usr/bin/env bash
# kpc diff / kpc verify side by side with the alternative a user has today, on the
# same files: load the programs with the real iptables-restore into fresh network
# namespaces, dump them with iptables-save and compare the dumps (text, not behaviour).
#
# Usage (root): scripts/bench-vs-netns.sh [legacy|nft]
# Files: build/bench/{full,next-full,partial}.restore (scripts/bench.sh and
# `kpc compile` make them; see docs/performance.md). Prints one line per step and a
# summary; figures go to docs/performance.md by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
flavor=${1:-legacy}
B=build/release/bin
D=build/bench
for f in full next-full partial; do
  [ -f "$D/$f.restore" ] || { echo "missing $D/$f.restore (see docs/performance.md)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 2; }

restore="iptables-$flavor-restore"
save="iptables-$flavor-save"
ns_list=()
cleanup() { for n in "${ns_list[@]}"; do ip netns del "$n" 2>/dev/null || true; done; }
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
sum() { awk 'BEGIN { s = 0; for (i = 1; i < ARGC; i++) s += ARGV[i]; printf "%.2f", s }' "$@"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }

# fresh_ns NAME: a fresh namespace kpc-bench-PID-NAME with the nfacct objects
# kube-proxy's rules name (not in a subshell: cleanup must see it).
fresh_ns() {
  local n=kpc-bench-$$-$1
  ip netns add "$n"
  ns_list+=("$n")
  ip netns exec "$n" nfacct add ct_state_invalid_dropped_pkts >/dev/null
  ip netns exec "$n" nfacct add localhost_nps_accepted_pkts >/dev/null
}

# load NS FILE...: apply each program with --noflush, in order; prints seconds.
load() {
  local n=$1; shift
  local t0; t0=$(now)
  for f in "$@"; do ip netns exec "$n" "$restore" --noflush <"$f"; done
  elapsed "$t0" "$(now)"
}
dump() {  # dump NS OUT: iptables-save without comments and counters; prints seconds
  local t0; t0=$(now)
  ip netns exec "$1" "$save" | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]/[0:0]/' >"$2"
  elapsed "$t0" "$(now)"
}

# kpc first: a deleted namespace's tables are torn down by a kernel worker for a
# minute or more after the alternative ran, which would slow anything measured then.
median3() {  # median3 CMD...: median wall seconds of three runs
  local ts=()
  for _ in 1 2 3; do
    local t0; t0=$(now)
    "$@" >/dev/null || true
    ts+=("$(elapsed "$t0" "$(now)")")
  done
  printf '%s\n' "${ts[@]}" | sort -n | sed -n 2p
}
echo "== kpc on the same files (median of 3)"
kd=$(median3 "$B/kpc" diff --flavor "$flavor" "$D/full.restore" "$D/next-full.restore")
kv=$(median3 "$B/kpc" verify --flavor "$flavor" --state "$D/full.restore" --partial "$D/partial.restore" --full "$D/next-full.restore")
echo "kpc diff: $kd s; kpc verify: $kv s"

tmp=$(mktemp -d)
echo "== the alternative to kpc diff ($flavor): two namespaces, restore, save, compare"
fresh_ns a; fresh_ns b; a=kpc-bench-$$-a; b=kpc-bench-$$-b
la=$(load "$a" "$D/full.restore"); echo "restore full.restore: $la s"
lb=$(load "$b" "$D/next-full.restore"); echo "restore next-full.restore: $lb s"
sa=$(dump "$a" "$tmp/a"); sb=$(dump "$b" "$tmp/b"); echo "save both: $sa s + $sb s"
t0=$(now); cmp -s "$tmp/a" "$tmp/b" && same=yes || same=no; c=$(elapsed "$t0" "$(now)")
alt_diff=$(sum "$la" "$lb" "$sa" "$sb" "$c")
echo "dumps identical: $same; alternative total: $alt_diff s (the two sides one after the other)"
cleanup; ns_list=()

echo "== the alternative to kpc verify ($flavor): prior+partial and prior+full in two namespaces"
fresh_ns a; fresh_ns b; a=kpc-bench-$$-a; b=kpc-bench-$$-b
la=$(load "$a" "$D/full.restore" "$D/partial.restore"); echo "restore full.restore + partial.restore: $la s"
lb=$(load "$b" "$D/full.restore" "$D/next-full.restore"); echo "restore full.restore + next-full.restore: $lb s"
sa=$(dump "$a" "$tmp/a"); sb=$(dump "$b" "$tmp/b")
cmp -s "$tmp/a" "$tmp/b" && same=yes || same=no
alt_verify=$(sum "$la" "$lb" "$sa" "$sb")
echo "dumps identical: $same; alternative total: $alt_verify s"
cleanup; ns_list=()
rm -rf "$tmp"

echo "== summary ($flavor)"
echo "kpc diff: $kd s (alternative $alt_diff s: $(ratio "$alt_diff" "$kd")x)"
echo "kpc verify: $kv s (alternative $alt_verify s: $(ratio "$alt_verify" "$kv")x)"
