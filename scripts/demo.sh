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
printf '\nA bad input is refused with a located error and exit code 2:\n'
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec:\n  clusterIP: 10.0.0.1\n  ports:\n  - {name: a, port: 80}\n  - {name: b, port: 70000}\n' > "$OUT/bad.yaml"
set +e
"$KPC" validate "$OUT/bad.yaml"
echo "exit code: $?"
