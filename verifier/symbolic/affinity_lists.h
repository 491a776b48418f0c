// Session affinity lists (`-m recent --name LIST`) as the symbolic layer keys them.
//
// kube-proxy names each recent list after its KUBE-SEP chain, which DNATs to one
// endpoint. A chain rename (an upgrade, a different hash) renames the list with it,
// yet the affinity it implements is the same: "this client keeps going to
// ns/svc:port's endpoint ip:port". Both the engine (which affinity state a rule
// tests or sets) and the semantic chain hashes (affected.cpp: which chains can be
// paired without exploring them) use that key, so they agree on what a rename is.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include "verifier/state/state.h"

namespace kpc::verifier::symbolic {

/// One rule's use of a recent list, from its save text.
struct ListUse {
  std::string list;  ///< the --name value
  std::string key;   ///< "ns/svc:port -> ip:port" for the --set rule that DNATs; else "list LIST"
  bool sets = false; ///< --set (the rule that records the client)
};
/// False when the rule names no recent list.
bool list_use(std::string_view rule_text, ListUse* out);

/// Every list of the nat table -> its key (a --set rule's key wins over other uses).
std::unordered_map<std::string, std::string> affinity_list_keys(const RulesetState& st);

}  // namespace kpc::verifier::symbolic
