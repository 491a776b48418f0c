#!/usr/bin/env bash
# README command 1: install what is missing, build the release preset, and run
# kpc on the bundled example cluster (fixtures/example), showing each step.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release

KPC=build/release/bin/kpc
EXAMPLE=fixtures/example
OUT=build/release/demo
mkdir -p "$OUT"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$KPC" --version
step "$KPC" validate --verbose "$EXAMPLE"
step "$KPC" compile "$EXAMPLE" --backend iptables -o "$OUT/iptables.restore" --stats
step "$KPC" compile "$EXAMPLE" --backend ip6tables -o "$OUT/ip6tables.restore" --stats
printf '\nFirst lines of %s:\n' "$OUT/iptables.restore"
head -n 25 "$OUT/iptables.restore"

printf '\nA change: shop/web gets a fourth endpoint. kube-proxy would now write a partial restore (KEP-3453):\n'
rm -rf "$OUT/next" && cp -r "$EXAMPLE" "$OUT/next"
sed -i 's/{"addresses": \["10.244.1.5"\]/{"addresses": ["10.244.1.9"], "conditions": {"ready": true}, "nodeName": "node-a"},\n        &/' \
  "$OUT/next/endpointslices.json"
step "$KPC" compile "$OUT/next" --backend iptables -o "$OUT/partial.restore" --stats --prior "$EXAMPLE"
grep -E '^(:KUBE-(SVC|SEP)|-X)' "$OUT/partial.restore" || true

printf '\nCheck it with the restore simulator: prior + partial must equal the full program for the change:\n'
step "$KPC" compile "$OUT/next" --backend iptables -o "$OUT/next-full.restore"
"$KPC" simulate --noflush "$OUT/iptables.restore" "$OUT/partial.restore" > "$OUT/prior+partial.save"
"$KPC" simulate --noflush "$OUT/next-full.restore" > "$OUT/full.save"
if diff -u "$OUT/full.save" "$OUT/prior+partial.save"; then echo "identical: prior + partial == full"; fi
step "$KPC" verify "$OUT/next" --prior "$EXAMPLE"

printf '\nTrace a packet from a pod to shop/cart (ClientIP affinity, three endpoints): exact probabilities:\n'
step "$KPC" trace "$OUT/iptables.restore" --src 10.244.1.50 --dst 10.96.30.30 --proto tcp --dport 9000 --from pod \
  | grep -E '^(\[|[0-9]+ outcomes)'

printf '\nA partial that forgot the new endpoint: kpc verify proves the difference with a witness packet:\n'
grep -v -- '-> 10.244.1.9:' "$OUT/partial.restore" > "$OUT/bad-partial.restore"
set +e
step "$KPC" verify --state "$OUT/iptables.restore" --partial "$OUT/bad-partial.restore" --full "$OUT/next-full.restore" \
  | head -n 12
set -e

printf '\nPre-upgrade diff: the same rules under other chain names are equivalent; the change is not:\n'
sed 's/KUBE-SEP-/KUBE-SEX-/g' "$OUT/iptables.restore" > "$OUT/renamed.restore"
step "$KPC" diff "$OUT/iptables.restore" "$OUT/renamed.restore"
set +e
step "$KPC" diff "$EXAMPLE" "$OUT/next" | head -n 16
echo "exit code: ${PIPESTATUS[0]}"
set -e

printf '\nDrift: the node lost a rule and has a stale chain; kpc writes the smallest repair:\n'
sed -e '0,/^-A KUBE-SVC-.*probability.*$/{/^-A KUBE-SVC-.*probability.*$/d}' \
    -e 's/^:KUBE-MARK-MASQ - \[0:0\]$/:KUBE-MARK-MASQ - [0:0]\n:KUBE-SEP-STALE0000000000 - [0:0]/' \
    "$OUT/full.save" > "$OUT/drifted.save"
step "$KPC" compile "$OUT/next" --prior-state "$OUT/drifted.save" --stats -o "$OUT/repair.restore"
cat "$OUT/repair.restore"
printf '\nA bad input is refused with a located error and exit code 2:\n'
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec:\n  clusterIP: 10.0.0.1\n  ports:\n  - {name: a, port: 80}\n  - {name: b, port: 70000}\n' > "$OUT/bad.yaml"
set +e
"$KPC" validate "$OUT/bad.yaml"
echo "exit code: $?"
