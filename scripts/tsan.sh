#!/usr/bin/env bash
# Builds tests/sanitizer/tsan_tail_parse.cpp with the verifier's parser and state machine
# under ThreadSanitizer (clang) and runs it: the tail parser's second thread against the
# main pass. Exit status non-zero on any TSan report or wrong result. About a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/tsan
mkdir -p "$out"
srcs=(verifier/parse/*.cpp verifier/state/*.cpp compiler/ir/*.cpp compiler/support/*.cpp)
clang++ -std=c++20 -O1 -g -fsanitize=thread -I. "${srcs[@]}" tests/sanitizer/tsan_tail_parse.cpp -o "$out/tsan_tail_parse"
TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$out/tsan_tail_parse"
echo "tsan: clean"
