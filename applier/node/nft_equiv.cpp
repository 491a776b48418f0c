#include "applier/node/nft_equiv.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_set>

namespace kpc::applier {

namespace vn = verifier::nft;

const char* nft_verdict_name(NftVerdict v) {
  switch (v) {
    case NftVerdict::Identical: return "identical";
    case NftVerdict::Equivalent: return "equivalent";
    case NftVerdict::NotEquivalent: return "not-equivalent";
  }
  return "?";
}

// Object equality, field by field (what `nft list` shows of an object, and its rules in
// order, its elements as a set). No text is built: at 10,000 Services the two tables hold
// ~600,000 rules each, and the comparison runs at every proof.
static bool same_chain(const vn::Chain& a, const vn::Chain& b) {
  if (a.base != b.base || a.device != b.device || a.comment != b.comment || a.rules.size() != b.rules.size()) return false;
  if (a.base && (a.type != b.type || a.hook != b.hook || a.priority != b.priority || a.policy != b.policy)) return false;
  for (size_t i = 0; i < a.rules.size(); ++i)
    if (a.rules[i].canonical() != b.rules[i].canonical()) return false;
  return true;
}

static bool same_set(const vn::Set& a, const vn::Set& b) {
  if (a.is_map != b.is_map || a.key_names != b.key_names || a.data_name != b.data_name || a.flags != b.flags ||
      a.timeout_ms != b.timeout_ms || a.size != b.size || a.policy != b.policy || a.comment != b.comment ||
      a.elements.size() != b.elements.size())
    return false;
  // Keys are unique within a set: same size and every element of a found in b with the same
  // value and comment is the same set of elements.
  for (const auto& e : a.elements) {
    const vn::Element* f = b.find_element(e.key);
    if (!f || f->value != e.value || f->comment != e.comment) return false;
  }
  return true;
}

NftComparison compare_nft_tables(const vn::NftState& got, const vn::NftState& want, vn::Family family,
                                 const std::string& name, const NftScope* scope) {
  NftComparison r;
  const vn::Table* a = got.find_table(family, name);
  const vn::Table* b = want.find_table(family, name);
  if (!a && !b) return r;
  if (!a || !b) {
    r.verdict = NftVerdict::NotEquivalent;
    r.differences.push_back(std::string("table ") + vn::family_name(family) + " " + name + " only after " +
                            (a ? "partial" : "full"));
    return r;
  }
  // Messages by object name, in the order the text comparison gave them (sorted by name).
  std::vector<std::pair<std::string, std::string>> chains_a, chains_b, sets_a, sets_b;
  bool equivalent_only = true;
  // A chain only the partial's state has is stale when it is a regular chain, empty, and
  // nothing in that state references it (the model's use count: rules and map elements).
  auto chain_a = [&](const vn::Chain& c) {
    const vn::Chain* other = b->find_chain(c.name);
    if (!other) {
      bool stale = !c.base && c.rules.empty() && vn::chain_references(*a, c.name) == 0;
      chains_a.push_back({c.name, "chain " + c.name + ": only after partial" + (stale ? " (empty, unreferenced: stale)" : "")});
      if (stale) r.stale_chains.push_back(c.name);
      else equivalent_only = false;
    } else if (!same_chain(c, *other)) {
      chains_a.push_back({c.name, "chain " + c.name + ": differs"});
      equivalent_only = false;
    }
  };
  auto set_a = [&](const vn::Set& s) {
    const vn::Set* other = b->find_set(s.name);
    if (!other) sets_a.push_back({s.name, "set " + s.name + ": only after partial"}), equivalent_only = false;
    else if (!same_set(s, *other)) sets_a.push_back({s.name, "set " + s.name + ": differs"}), equivalent_only = false;
  };
  if (scope) {
    for (const auto& n : scope->chains) {
      if (const vn::Chain* c = a->find_chain(n)) chain_a(*c);
      else if (b->find_chain(n)) chains_b.push_back({n, "chain " + n + ": only after full"}), equivalent_only = false;
    }
    for (const auto& n : scope->sets) {
      if (const vn::Set* s = a->find_set(n)) set_a(*s);
      else if (b->find_set(n)) sets_b.push_back({n, "set " + n + ": only after full"}), equivalent_only = false;
    }
  } else {
    for (const auto& c : a->chains) chain_a(c);
    for (const auto& c : b->chains)
      if (!a->find_chain(c.name)) chains_b.push_back({c.name, "chain " + c.name + ": only after full"}), equivalent_only = false;
    for (const auto& s : a->sets) set_a(s);
    for (const auto& s : b->sets)
      if (!a->find_set(s.name)) sets_b.push_back({s.name, "set " + s.name + ": only after full"}), equivalent_only = false;
  }
  for (auto* v : {&chains_a, &chains_b, &sets_a, &sets_b}) {
    std::sort(v->begin(), v->end());
    for (auto& [n, m] : *v) r.differences.push_back(std::move(m));
  }
  std::sort(r.stale_chains.begin(), r.stale_chains.end());
  if (a->flowtables.size() != b->flowtables.size()) r.differences.push_back("flowtables differ"), equivalent_only = false;
  if (r.differences.empty()) r.verdict = NftVerdict::Identical;
  else r.verdict = equivalent_only ? NftVerdict::Equivalent : NftVerdict::NotEquivalent;
  return r;
}

std::optional<nftables::KernelListing> kernel_listing(const vn::NftState& state, vn::Family family) {
  const vn::Table* t = state.find_table(family, "kube-proxy");
  if (!t) return std::nullopt;
  nftables::KernelListing l;
  l.chains.emplace();
  l.sets.emplace();
  for (const auto& c : t->chains) l.chains->insert(c.name);
  for (const auto& s : t->sets) l.sets->insert(s.name);
  l.elements.emplace();
  for (size_t i = 0; i < nftables::kContainers; ++i) {
    const vn::Set* s = t->find_set(nftables::container_name(static_cast<nftables::Container>(i)));
    if (!s) continue;
    for (const auto& e : s->elements) {
      std::string key;
      for (const auto& k : e.key) key += (key.empty() ? "" : " . ") + k;
      (*l.elements)[i][key] = e.value ? *e.value : "";
    }
  }
  return l;
}

}  // namespace kpc::applier
