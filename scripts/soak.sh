#!/bin/sh
# kpc-applier's churn soak and one-change latency (issue 15 §4-§5), by hand, not in CI:
#   scripts/soak.sh churn  [soak.py options]   10,000 Services x 10 endpoints, 50 changes/s, 10 min
#   scripts/soak.sh single [soak.py options]   the same cluster, one EndpointSlice change every 5 s
# Runs in a throw-away network namespace (root) with the real iptables-restore (legacy); the
# summary (JSON) is printed, the records are in /tmp/kpc-soak-<mode>/ (docs/performance.md).
set -eu
mode=${1:-churn}; shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KPC_APPLIER:-$root/build/release/bin/kpc-applier}
ns=kpc-soak-$$
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" nfacct add ct_state_invalid_dropped_pkts >/dev/null 2>&1 || true
ip netns exec "$ns" nfacct add localhost_nps_accepted_pkts >/dev/null 2>&1 || true
ip netns exec "$ns" python3 "$root/scripts/soak.py" --applier "$bin" --mode "$mode" --out "/tmp/kpc-soak-$mode" "$@"
