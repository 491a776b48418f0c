#!/usr/bin/env bash
# Builds the ThreadSanitizer drivers in tests/sanitizer with clang and runs them: the
# iptables tail parser's second thread against the main pass (tsan_tail_parse), and the nft
# model's threads (tsan_nft_stream: a prior applied while parsed, graph caches built aside, a
# state copied while a script is applied). Exit status non-zero on any TSan report or wrong
# result. A few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/tsan
mkdir -p "$out"
srcs=(verifier/parse/*.cpp verifier/state/*.cpp compiler/ir/*.cpp compiler/support/*.cpp)
clang++ -std=c++20 -O1 -g -fsanitize=thread -I. "${srcs[@]}" tests/sanitizer/tsan_tail_parse.cpp -o "$out/tsan_tail_parse"
TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$out/tsan_tail_parse"
nft_srcs=(verifier/nft/*.cpp compiler/support/*.cpp)
clang++ -std=c++20 -O1 -g -fsanitize=thread -I. "${nft_srcs[@]}" tests/sanitizer/tsan_nft_stream.cpp -lre2 -o "$out/tsan_nft_stream"
TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$out/tsan_nft_stream"
echo "tsan: clean"
