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
printf '\nA bad input is refused with a located error and exit code 2:\n'
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec:\n  clusterIP: 10.0.0.1\n  ports:\n  - {name: a, port: 80}\n  - {name: b, port: 70000}\n' > "$OUT/bad.yaml"
set +e
"$KPC" validate "$OUT/bad.yaml"
echo "exit code: $?"
