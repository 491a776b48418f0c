// libFuzzer target: any bytes as an iptables-restore program. The parser and
// the state machine must never crash, hang or trip a sanitizer, whatever the
// input; applying the same text twice must give the same state.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "verifier/state/state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kpc::verifier;
  // Oversized inputs are rejected before any work, as in the tests/fuzz/ targets: every
  // input is parsed twice and applied sixteen times (two families, two flavours, with and
  // without --noflush, parse-then-apply and streaming), all linear in its length, so a
  // longer program only repeats line shapes a short one has while slowing every execution.
  // The verifier's scale (430k-line programs) is its unit and kernel tests' job.
  // scripts/fuzz.sh runs this target with -max_len=16384.
  if (size > 64 * 1024) return -1;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (kpc::IPFamily fam : {kpc::IPFamily::V4, kpc::IPFamily::V6}) {
    ParseOptions po;
    po.family = fam;
    ParseResult parsed = parse_restore(text, po);
    for (Flavor f : {Flavor::Legacy, Flavor::Nft})
      for (bool noflush : {true, false}) {
        RulesetState a = RulesetState::empty(fam);
        RulesetState b = RulesetState::empty(fam);
        ApplyResult ra = apply(a, parsed, ApplyOptions{noflush, f});
        ApplyResult rb = apply_text(b, text, ApplyOptions{noflush, f});
        if (ra.ok() != rb.ok() || print_save(a, f) != print_save(b, f)) __builtin_trap();
        std::string dump = print_save(a, f);
        (void)diff_states(a, b);
      }
  }
  return 0;
}
