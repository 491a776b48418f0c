// `prior ⊕ partial ≡ full?` — the check KEP-3453 deferred. Level 1 (this file):
// apply both programs to the prior state with the exact restore state machine and
// compare the resulting states chain by chain (linear: rules are interned). A
// difference only in chains no built-in chain can reach (e.g. a stale chain left
// behind) cannot change any packet's fate: "equivalent". A difference in a
// reachable chain needs level 2 (packet classes) to decide; until that exists the
// verdict is "differs" with the chains and the services they belong to, never a
// guessed "equivalent".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "verifier/state/state.h"

namespace kpc::verifier {

enum class Verdict : uint8_t {
  Identical,    ///< prior+partial is exactly prior+full
  Equivalent,   ///< the states differ only in chains unreachable from built-in chains
  Differs,      ///< reachable chains differ (packet-level proof not available yet)
  FailsToApply  ///< the partial (or the full) program fails on the prior state
};
const char* verdict_name(Verdict v);

struct ChainDifference {
  ir::TableId table;
  std::string chain;
  std::string kind;                   ///< "only after partial", "only after full", "rules differ", "policy differs"
  bool reachable = false;             ///< reachable from a built-in chain in either state
  std::vector<std::string> services;  ///< "ns/name:port" from the rule comments of the chain
};

struct VerifyResult {
  Verdict verdict = Verdict::Identical;
  std::optional<ApplyError> failure;  ///< with FailsToApply
  std::string failing_program;        ///< "partial" or "full"
  std::vector<ChainDifference> differences;
};

VerifyResult verify(const RulesetState& prior, std::string_view partial, std::string_view full, Flavor flavor);

/// Human-readable report (one line per difference) and a JSON rendering.
std::string format_text(const VerifyResult& r);
std::string format_json(const VerifyResult& r);

}  // namespace kpc::verifier
