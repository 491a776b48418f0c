#!/usr/bin/env bash
# kpc diff / kpc verify side by side with the alternative a user has today, on the
# same files: load the programs with the real iptables-restore into fresh network
# namespaces, dump them with iptables-save and compare the dumps (text, not behaviour).
#
# Usage (root): scripts/bench-vs-netns.sh [legacy|nft]
# Files: build/bench/{full,next-full,partial}.restore (scripts/bench.sh and
# `kpc compile` make them; see docs/performance.md). Prints one line per step and a
# summary; figures go to docs/performance.md by hand.
#
# Usage (root): scripts/bench-vs-netns.sh nftables DIR [RUNS]
# The nftables back end (issue 16 §5): kpc verify, kpc diff of two nft programs and
# the cross-back-end diff against the real `nft -f` / `nft list ruleset` (and
# iptables-restore for the cross diff's iptables side) in fresh namespaces, RUNS
# times each (default 2). DIR holds prior.nft, partial.nft, full.nft, next.nft and
# ipt.restore, optionally cluster.json (docs/performance.md, "kpc against the real
# nft, side by side", says how they are made; scripts/one-change.py makes
# cluster-next.json). The iptables side uses the host's default `iptables-restore`
# (nf_tables or legacy). kpc is $KPC_BIN/kpc (default build/release/bin). Every step is timed with /usr/bin/time: wall, user, sys and
# peak RSS, with the load average before it; the alternative's figures are the sums
# of its steps (the namespaces' teardown after it, by a kernel worker, is not counted).
set -euo pipefail
cd "$(dirname "$0")/.."
flavor=${1:-legacy}
B=${KPC_BIN:-build/release/bin}
D=build/bench
if [ "$flavor" != nftables ]; then
  for f in full next-full partial; do
    [ -f "$D/$f.restore" ] || { echo "missing $D/$f.restore (see docs/performance.md)" >&2; exit 2; }
  done
fi
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

if [ "$flavor" = nftables ]; then
  ND=${2:?usage: scripts/bench-vs-netns.sh nftables DIR [RUNS]}
  runs=${3:-2}
  for f in prior.nft partial.nft full.nft next.nft ipt.restore; do
    [ -f "$ND/$f" ] || { echo "missing $ND/$f (see docs/performance.md)" >&2; exit 2; }
  done
  tmp=$(mktemp -d)
  load1() { cut -d' ' -f1 /proc/loadavg; }
  # timed LABEL CMD...: run CMD under /usr/bin/time, print one line
  # "LABEL load=L wall=W user=U sys=S rss_kb=K rc=R" (on fd 3) and append "W U S" to $tmp/steps.
  timed() {
    local label=$1; shift
    local l rc=0; l=$(load1)
    /usr/bin/time -f '%e %U %S %M' -o "$tmp/t" "$@" || rc=$?
    read -r w u s m < <(tail -n 1 "$tmp/t")  # after "Command exited with non-zero status"
    echo "$label load=$l wall=$w user=$u sys=$s rss_kb=$m rc=$rc" >&3
    echo "$w $u $s" >>"$tmp/steps"
  }
  # total LABEL: the sums of the steps timed since the last total.
  total() {
    awk -v l="$1" '{ w += $1; u += $2; s += $3 }
      END { printf "%s TOTAL wall=%.2f user=%.2f sys=%.2f cpu=%.2f\n", l, w, u, s, u + s }' "$tmp/steps"
    : >"$tmp/steps"
  }
  : >"$tmp/steps"
  exec 3>&1  # timed's lines, whatever the timed command's stdout goes to

  # kpc first (see below: a deleted namespace's tables are torn down afterwards).
  for r in $(seq "$runs"); do
    echo "== kpc, run $r"
    timed "kpc-verify" "$B/kpc" verify --state "$ND/prior.nft" --partial "$ND/partial.nft" --full "$ND/full.nft" >/dev/null
    timed "kpc-diff" "$B/kpc" diff "$ND/prior.nft" "$ND/next.nft" >/dev/null
    timed "kpc-cross-files" "$B/kpc" diff "$ND/ipt.restore" "$ND/prior.nft" --from-backend iptables --to-backend nftables >/dev/null
    if [ -f "$ND/cluster.json" ]; then  # the same from the snapshot: both compiles included
      timed "kpc-cross-snapshot" "$B/kpc" diff "$ND/cluster.json" --from-backend iptables --to-backend nftables >/dev/null
    fi
    : >"$tmp/steps"
  done

  for r in $(seq "$runs"); do
    echo "== the alternative to kpc verify, run $r: prior+partial and prior+full in two namespaces, list, diff"
    fresh_ns a; fresh_ns b; a=kpc-bench-$$-a; b=kpc-bench-$$-b
    timed "alt-verify nft -f prior.nft (a)" ip netns exec "$a" nft -f "$ND/prior.nft"
    timed "alt-verify nft -f partial.nft (a)" ip netns exec "$a" nft -f "$ND/partial.nft"
    timed "alt-verify nft -f prior.nft (b)" ip netns exec "$b" nft -f "$ND/prior.nft"
    timed "alt-verify nft -f full.nft (b)" ip netns exec "$b" nft -f "$ND/full.nft"
    timed "alt-verify nft list ruleset (a)" ip netns exec "$a" nft list ruleset >"$tmp/a"
    timed "alt-verify nft list ruleset (b)" ip netns exec "$b" nft list ruleset >"$tmp/b"
    timed "alt-verify diff" cmp -s "$tmp/a" "$tmp/b"
    total "alt-verify"
    cleanup; ns_list=()

    echo "== the alternative to kpc diff, run $r: prior and next in two namespaces, list, diff"
    fresh_ns a; fresh_ns b
    timed "alt-diff nft -f prior.nft (a)" ip netns exec "$a" nft -f "$ND/prior.nft"
    timed "alt-diff nft -f next.nft (b)" ip netns exec "$b" nft -f "$ND/next.nft"
    timed "alt-diff nft list ruleset (a)" ip netns exec "$a" nft list ruleset >"$tmp/a"
    timed "alt-diff nft list ruleset (b)" ip netns exec "$b" nft list ruleset >"$tmp/b"
    timed "alt-diff diff" cmp -s "$tmp/a" "$tmp/b"
    total "alt-diff"
    cleanup; ns_list=()

    # Only the loading cost: an iptables-save dump and an nft listing cannot be compared.
    echo "== the alternative to the cross diff, run $r: iptables-restore ipt.restore and nft -f prior.nft, list both"
    fresh_ns a; fresh_ns b
    timed "alt-cross iptables-restore ipt.restore (a)" ip netns exec "$a" iptables-restore --noflush "$ND/ipt.restore"
    timed "alt-cross nft -f prior.nft (b)" ip netns exec "$b" nft -f "$ND/prior.nft"
    timed "alt-cross iptables-save (a)" ip netns exec "$a" iptables-save >"$tmp/a"
    timed "alt-cross nft list ruleset (b)" ip netns exec "$b" nft list ruleset >"$tmp/b"
    total "alt-cross"
    cleanup; ns_list=()
  done
  rm -rf "$tmp"
  exit 0
fi

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
