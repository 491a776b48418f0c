#!/usr/bin/env bash
# Builds the asan preset (gcc, RelWithDebInfo, -fsanitize=address,undefined, no
# recovery: any report fails the test) and runs the whole ctest suite under it,
# the same steps as `cmake --workflow --preset ci-asan`, timing each step
# (docs/reliability.md has the figures).
#
# Usage: scripts/test-asan.sh [CTEST_ARGS...]     e.g. scripts/test-asan.sh -L unit
#
# The test preset "asan" runs every label (unit, property, golden, kernel, schema,
# cli): about 3 minutes with -j2 on the 2-core machine, the build about 12 minutes
# from scratch (docs/reliability.md). Kernel tests skip themselves without root.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

t0=$(date +%s)
cmake --preset asan
t1=$(date +%s)
cmake --build --preset asan
t2=$(date +%s)
status=0
ctest --preset asan "$@" || status=$?
t3=$(date +%s)

echo
echo "test-asan: configure $((t1 - t0)) s, build $((t2 - t1)) s, tests $((t3 - t2)) s, total $((t3 - t0)) s"
[ $status -eq 0 ] && echo "test-asan: all tests passed under ASan + UBSan" || echo "test-asan: FAILED (ctest exit $status)"
exit $status
