// libFuzzer target (b): any bytes as a JSON snapshot file (the loader's own JSON reader).
//  - the loader never crashes, hangs or trips a sanitizer;
//  - it fails iff it reported an error, and every error is located and renders safely;
//  - on success the model holds its invariants (fuzz_common.h: check_model), and the
//    snapshot compiles for both back ends to well-formed restore text whose every
//    --comment is safe (check_program_text): nothing in the input reaches a rule line
//    except through validated names.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Oversized inputs are rejected before any work. The loader's own size limit (256 MiB by default,
  // E0002) and its alias/depth limits are covered by tests/unit/loader_hostile_test.cpp;
  // here a big input only slows every execution down (ASan, yaml-cpp and the compiler are
  // all linear or worse in it) without reaching new code. Kubernetes objects are small:
  // 64 KiB holds the largest fixture snapshot (large-cluster mode, ~30 KB) twice.
  if (size > 64 * 1024) return -1;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kpc::fuzz::Loaded l;
  kpc::fuzz::load_one(l, "snapshot.json", text);
  if (!l.ok) return 0;
  kpc::fuzz::check_model(l.snap);
  kpc::fuzz::compile_and_check(l.snap);
  return 0;
}
