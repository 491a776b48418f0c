#!/usr/bin/env bash
# README command 2 (and what CI runs): install what is missing, build the
# release preset and run the whole test suite: unit, property, golden, schema,
# CLI and real-kernel tests (the kernel tests need root for network namespaces;
# they skip themselves otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --workflow --preset ci
