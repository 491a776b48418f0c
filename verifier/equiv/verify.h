// `prior ⊕ partial ≡ full?` — the check KEP-3453 deferred.
// Level 1: apply both programs to the prior state with the exact restore state
// machine and compare the resulting states chain by chain (linear: rules are
// interned). Same states: "identical". A difference only in chains no built-in
// chain can reach (e.g. a stale chain left behind) cannot change any packet's
// fate: "equivalent".
// Level 2, when a reachable chain differs: the two states are compared by
// behaviour (verifier/symbolic/compare.h). No packet class with a different
// outcome: "equivalent" (the differences are listed); one or more: "not
// equivalent" with a witness packet per class, its outcomes on both sides and
// its service; only undecidable classes (a match kpc does not model): "cannot
// prove", never a guess.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "verifier/state/state.h"
#include "verifier/sem/compare.h"

namespace kpc::verifier {

enum class Verdict : uint8_t {
  Identical,      ///< prior+partial is exactly prior+full
  Equivalent,     ///< the states differ, but no packet is treated differently
  NotEquivalent,  ///< some packet class has another outcome (witnesses in behaviour)
  CannotProve,    ///< reachable chains differ and some classes meet matches kpc does not model
  FailsToApply    ///< the partial (or the full) program fails on the prior state
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
  /// Level 2 (when a reachable chain differs): the behavioural comparison, before = prior+full
  /// (what the node should hold), after = prior+partial (what it would hold).
  std::optional<sem::CompareResult> behaviour;
};

struct VerifyOptions {
  /// The node's addresses for the packet-level comparison (loopback is always local).
  std::vector<IPAddr> local_addresses;
  /// Add kube-proxy's jumps from the built-in chains (which it installs outside its
  /// restore programs) when the prior state has none, before comparing behaviour.
  bool kube_proxy_jumps = true;
  /// The node's ipsets (`ipset save`), for `-m set` matches at packet level.
  const ipset::Table* ipsets = nullptr;
};

/// prior is taken by value: a caller done with its prior state moves it in (one copy fewer).
VerifyResult verify(RulesetState prior, std::string_view partial, std::string_view full, Flavor flavor,
                    const VerifyOptions& options = {});

/// Human-readable report (one line per difference) and a JSON rendering.
/// verbose: also the comparison's own words (start classes, the narrowing) and each class's
/// description; off, a reviewer's text (`kpc verify --verbose`).
std::string format_text(const VerifyResult& r, bool verbose = false);
std::string format_json(const VerifyResult& r);
/// A PR-comment-sized Markdown report (verdict, chains, the packet-level table by service).
std::string format_markdown(const VerifyResult& r);

}  // namespace kpc::verifier
