#!/usr/bin/env bash
# Builds the libFuzzer targets (preset "asan": clang, ASan + UBSan, the same build CI
# runs the test suite and the fuzz smoke tests in) and runs each of them for a while,
# then prints executions, coverage and crashes per target (docs/reliability.md).
#
# Usage: scripts/fuzz.sh [--smoke] [--jobs N] [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 60 (10 with --smoke)
#   TARGET              e.g. load_yaml; default every bin/kpc_fuzz_* target:
#                       load_yaml, load_json, compile_apply, restore_roundtrip (tests/fuzz/)
#                       and restore (verifier/fuzz/)
#   --smoke             10 s per target: fails on any crash (CI runs the ctest smoke tests instead)
#   --jobs N            run N targets at once (at most 2: the machine has 2 shared cores)
#
# Binaries: build/asan/bin/kpc_fuzz_<target>. Corpora live in build/fuzz/corpus/<target>/
# (seeded from fixtures/ by tests/fuzz/make_seeds.py, and grown by every run; not
# committed). Crashes, timeouts and OOMs are written to build/fuzz/artifacts/<target>/;
# reproduce one with
#   build/asan/bin/kpc_fuzz_<target> build/fuzz/artifacts/<target>/crash-...
# After a crash the target is restarted for the rest of its time (at most 5 crashes).
# Exit status: 0 if no target crashed, 1 otherwise, 2 on a usage or build error.
set -euo pipefail
cd "$(dirname "$0")/.."

smoke=0
jobs=1
secs=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --jobs) jobs="$2"; shift ;;
    --jobs=*) jobs="${1#--jobs=}" ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    [0-9]*) secs="$1" ;;
    *) targets+=("$1") ;;
  esac
  shift
done
if [ -z "$secs" ]; then secs=60; [ $smoke = 1 ] && secs=10; fi
if [ "$jobs" -gt 2 ]; then echo "fuzz.sh: --jobs is capped at 2 (shared 2-core machine)" >&2; jobs=2; fi

build=build/fuzz      # corpora, artifacts and logs
bindir=build/asan/bin # the asan preset's binaries
echo "fuzz.sh: configuring and building the asan preset's fuzz targets"
cmake --preset asan >/dev/null
all=(load_yaml load_json compile_apply restore_roundtrip restore)
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
cmake --build --preset asan --target "${targets[@]/#/kpc_fuzz_}" >/dev/null || {
  echo "fuzz.sh: build failed; rerun: cmake --build --preset asan --target ${targets[*]/#/kpc_fuzz_}" >&2
  exit 2
}

echo "fuzz.sh: seeding corpora from fixtures/"
python3 tests/fuzz/make_seeds.py . "$build/corpus"

dict_for() {
  case "$1" in
    *json*) echo tests/fuzz/dict/snapshot_json.dict ;;
    restore*) echo tests/fuzz/dict/restore.dict ;;
    *) echo tests/fuzz/dict/snapshot_yaml.dict ;;
  esac
}
# Longest input: every target rejects inputs over 64 KiB (see each target); the
# verifier's own target applies every input sixteen times, so it gets shorter ones.
max_len_for() {
  case "$1" in
    restore) echo 16384 ;;
    *) echo 65536 ;;
  esac
}

# run_target NAME: fuzzes for $secs seconds; writes a summary line to $build/fuzz-logs/NAME.summary
run_target() {
  local t="$1" bin="$bindir/kpc_fuzz_$1"
  local corpus="$build/corpus/$t" art="$build/artifacts/$t/" logdir="$build/fuzz-logs"
  mkdir -p "$corpus" "$art" "$logdir"
  local dirs=("$corpus")
  for d in tests/fuzz/seeds/$t tests/fuzz/regressions/$t; do [ -d "$d" ] && dirs+=("$d"); done
  local log="$logdir/$t.log" start end left execs=0 crashes=0 runs=0 rc
  : >"$log"
  start=$(date +%s)
  end=$((start + secs))
  while :; do
    left=$((end - $(date +%s)))
    [ $left -le 0 ] && break
    local before after
    before=$(find "$art" -type f | wc -l)
    set +e
    "$bin" -max_total_time=$left -max_len="$(max_len_for "$t")" -timeout=5 -rss_limit_mb=2048 \
      -dict="$(dict_for "$t")" -artifact_prefix="$art" -print_final_stats=1 -reload=0 \
      "${dirs[@]}" >>"$log" 2>&1
    rc=$?
    set -e
    runs=$((runs + 1))
    after=$(find "$art" -type f | wc -l)
    local n
    n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
    # A crashed run prints no final stats: count its executions from its last status line.
    if [ $rc -ne 0 ]; then
      n=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
      crashes=$((crashes + (after > before ? after - before : 1)))
      [ $crashes -ge 5 ] && break
    fi
    execs=$((execs + ${n:-0}))
    [ $rc -eq 0 ] && break
  done
  local covline cov ft corp
  covline=$(grep -E '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$covline")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$covline")
  corp=$(find "$corpus" -type f | wc -l)
  printf '%-18s %6s %10s %8s %7s %7s %7s %7s\n' "$t" "$((secs))" "$execs" \
    "$((execs / (secs > 0 ? secs : 1)))" "${cov:-?}" "${ft:-?}" "$corp" "$crashes" >"$logdir/$t.summary"
  echo "fuzz.sh: $t done: $execs executions, cov ${cov:-?}, ft ${ft:-?}, crashes $crashes (log $log)"
}

mkdir -p "$build/fuzz-logs"
stamp="$build/fuzz-logs/.started"
touch "$stamp"
echo "fuzz.sh: ${#targets[@]} targets, ${secs}s each, $jobs at a time"
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if [ $running -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait || true

echo
printf '%-18s %6s %10s %8s %7s %7s %7s %7s\n' target secs execs exec/s cov ft corpus crashes
status=0
for t in "${targets[@]}"; do
  cat "$build/fuzz-logs/$t.summary"
  c=$(awk '{print $8}' "$build/fuzz-logs/$t.summary")
  [ "$c" != 0 ] && status=1
done
if [ $status -ne 0 ]; then
  echo
  echo "fuzz.sh: crashes found; inputs in $build/artifacts/<target>/, logs in $build/fuzz-logs/"
  find "$build/artifacts" -type f -newer "$stamp" 2>/dev/null | head -20
fi
exit $status
