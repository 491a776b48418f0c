#!/usr/bin/env bash
# README command 2 (and what CI runs): install what is missing, then
#  1. the release preset: build and run the whole test suite (unit, property, golden,
#     schema, CLI and real-kernel tests; the kernel tests need root for network
#     namespaces and skip themselves otherwise);
#  2. the asan preset (clang, ASan + UBSan, the libFuzzer targets): build and run the
#     whole suite again under the sanitizers, plus the sanitizer canaries (LeakSanitizer
#     and UBSan must report) and a smoke run of every fuzz target (label fuzz-smoke).
# Stops at the first failing step; prints the time of each (docs/testing.md has figures).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

t0=$(date +%s)
cmake --workflow --preset ci
t1=$(date +%s)
echo "test.sh: release build and tests: $((t1 - t0)) s"
cmake --workflow --preset ci-asan
t2=$(date +%s)
echo "test.sh: release build and tests: $((t1 - t0)) s; asan build and tests (ASan + UBSan, fuzz smoke): $((t2 - t1)) s; total $((t2 - t0)) s"
