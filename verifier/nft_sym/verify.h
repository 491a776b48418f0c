// `prior ⊕ partial ≡ full?` for nft transactions (issue 16 §4): the iptables verifier's
// questions and verdicts (verifier/equiv/verify.h) over the nft state model.
// Level 1: apply both transactions to the prior state with the exact nft model (nft's
// atomicity and error text); equal listings (`nft list ruleset`, handles aside): identical.
// Otherwise the differing objects (chains, sets, maps) are listed; if none is reachable
// from a base chain (a stale chain, a set no rule reads), equivalent. Level 2: the two
// states are compared by behaviour (compare.h): not equivalent with witnesses, equivalent,
// or cannot prove.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "verifier/equiv/verify.h"
#include "verifier/nft/nft.h"
#include "verifier/sem/compare.h"

namespace kpc::verifier::nft_sym {

struct ObjectDifference {
  std::string table;  ///< "ip kube-proxy"
  std::string object; ///< chain name, or "set NAME" / "map NAME"
  std::string kind;   ///< "only after partial", "only after full", "rules differ", "elements differ", ...
  bool reachable = false;
  std::vector<std::string> services;  ///< "ns/name:port" from kube-proxy's chain names and comments
};

struct NftVerifyResult {
  Verdict verdict = Verdict::Identical;
  std::optional<nft::NftError> failure;
  std::string failing_program;  ///< "partial" or "full"
  std::vector<ObjectDifference> differences;
  std::optional<sem::CompareResult> behaviour;  ///< before = prior+full, after = prior+partial
};

struct NftVerifyOptions {
  std::vector<IPAddr> local_addresses;
  /// The states and the spent transactions are not freed but kept until the process ends
  /// (kpc::keep_until_exit): for a one-shot command, where freeing them is ~0.15 s after the
  /// verdict is known at 10,000 Services. Never in a process that verifies again and again.
  bool keep_until_exit = false;
  /// Where not kept until exit, the same objects may be handed here instead of being freed:
  /// the caller frees them when it chooses (a benchmark, after its clock stops).
  std::vector<std::shared_ptr<void>>* spent = nullptr;
};

NftVerifyResult verify_nft(const nft::NftState& prior, std::string_view partial, std::string_view full,
                           const NftVerifyOptions& options = {}, std::string_view partial_name = "partial",
                           std::string_view full_name = "full");

/// The same with the prior taken over (no copy of it is made for the full's side).
NftVerifyResult verify_nft(nft::NftState&& prior, std::string_view partial, std::string_view full,
                           const NftVerifyOptions& options = {}, std::string_view partial_name = "partial",
                           std::string_view full_name = "full");

/// Reads a prior state: an `nft list ruleset` listing or a transaction applied to an empty node.
bool read_nft_state(std::string_view text, std::string_view file_name, nft::NftState* out, nft::NftError* err);

/// `kpc verify --state PRIOR --partial P --full F` from the three texts: read_nft_state of
/// the prior, then verify_nft — the same result, errors and messages — with the work spread
/// over two threads (the transactions are parsed while the prior is read; the partial's and
/// the full's applications, and the two listings, run side by side). False with *prior_error
/// when the prior cannot be read (read_nft_state's error).
bool verify_nft_texts(std::string_view prior_text, std::string_view prior_name, std::string_view partial,
                      std::string_view full, const NftVerifyOptions& options, std::string_view partial_name,
                      std::string_view full_name, NftVerifyResult* out, nft::NftError* prior_error);

std::string format_text(const NftVerifyResult& r, bool verbose = false);
std::string format_json(const NftVerifyResult& r);
std::string format_markdown(const NftVerifyResult& r);

/// The differing objects of two states (what format_* lists), with reachability.
std::vector<ObjectDifference> object_differences(const nft::NftState& a, const nft::NftState& b);

/// Is chain (or set) `name` reachable from a base chain in table a or b (the same table of
/// the two states)? A set is reachable when a rule of a reachable chain names it.
using ReachableFn = std::function<bool(const nft::Table& a, const nft::Table& b, const std::string& name, bool is_set)>;

/// The same with reachability answered by the caller (affected.cpp, from its reference
/// index, instead of a forward walk over both tables); `reachable` must answer exactly as
/// the forward walk would.
std::vector<ObjectDifference> object_differences(const nft::NftState& a, const nft::NftState& b,
                                                 const ReachableFn& reachable);

}  // namespace kpc::verifier::nft_sym
