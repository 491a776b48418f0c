#!/usr/bin/env bash
# Builds the asan preset (clang, -O1, -fsanitize=address,undefined with no recovery, so
# any report fails the test; libraries also built with -fsanitize=fuzzer-no-link and the
# libFuzzer targets built) and runs the whole ctest suite under it: every label, the
# sanitizer canaries and the fuzz smoke tests. The same steps as
# `cmake --workflow --preset ci-asan` (the second half of scripts/test.sh), timing each
# step (docs/reliability.md has the figures).
#
# Usage: scripts/test-asan.sh [CTEST_ARGS...]     e.g. scripts/test-asan.sh -L unit
#
# Kernel tests skip themselves without root.
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
