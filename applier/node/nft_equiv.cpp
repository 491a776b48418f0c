#include "applier/node/nft_equiv.h"

#include <algorithm>
#include <map>
#include <set>

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

static std::string chain_text(const vn::Chain& c) {
  std::string t = c.base ? "base " + c.type + " " + c.hook + " " + std::to_string(c.priority) + " " + c.policy : "regular";
  if (c.device) t += " device " + *c.device;
  if (c.comment) t += " comment " + *c.comment;
  t += "\n";
  for (const auto& r : c.rules) t += r.canonical + "\n";
  return t;
}

static std::string element_text(const vn::Element& e) {
  std::string t;
  for (const auto& k : e.key) t += k + " . ";
  if (e.value) t += ": " + *e.value;
  if (e.comment) t += " comment " + *e.comment;
  return t;
}

static std::string set_text(const vn::Set& s) {
  std::string t = std::string(s.is_map ? "map" : "set") + " " + s.name + " keys";
  for (const auto& k : s.key_names) t += " " + k;
  t += " data " + s.data_name + " flags";
  for (const auto& f : s.flags) t += " " + f;
  t += " timeout " + std::to_string(s.timeout_ms) + " size " + std::to_string(s.size) + " policy " + s.policy;
  if (s.comment) t += " comment " + *s.comment;
  t += "\n";
  std::vector<std::string> el;
  for (const auto& e : s.elements) el.push_back(element_text(e));
  std::sort(el.begin(), el.end());
  for (const auto& e : el) t += e + "\n";
  return t;
}

NftComparison compare_nft_tables(const vn::NftState& got, const vn::NftState& want, vn::Family family,
                                 const std::string& name) {
  NftComparison r;
  const vn::Table* a = got.find_table(family, name);
  const vn::Table* b = want.find_table(family, name);
  static const vn::Table kEmpty;
  if (!a && !b) return r;
  if (!a || !b) {
    r.verdict = NftVerdict::NotEquivalent;
    r.differences.push_back(std::string("table ") + vn::family_name(family) + " " + name + " only after " +
                            (a ? "partial" : "full"));
    return r;
  }
  std::map<std::string, std::string> ca, cb, sa, sb;
  for (const auto& c : a->chains) ca[c.name] = chain_text(c);
  for (const auto& c : b->chains) cb[c.name] = chain_text(c);
  for (const auto& s : a->sets) sa[s.name] = set_text(s);
  for (const auto& s : b->sets) sb[s.name] = set_text(s);
  // Chains referenced by any rule or map element of the partial's state.
  std::set<std::string> referenced;
  for (const auto& c : a->chains)
    for (const auto& rule : c.rules) referenced.insert(rule.refs.chains.begin(), rule.refs.chains.end());
  for (const auto& s : a->sets)
    for (const auto& e : s.elements)
      if (e.value) {
        auto sp = e.value->find(' ');
        if (sp != std::string::npos) referenced.insert(e.value->substr(sp + 1));
      }
  bool equivalent_only = true;
  for (const auto& [n, t] : ca) {
    auto it = cb.find(n);
    if (it == cb.end()) {
      const vn::Chain* c = a->find_chain(n);
      bool stale = c && !c->base && c->rules.empty() && !referenced.count(n);
      r.differences.push_back("chain " + n + ": only after partial" + (stale ? " (empty, unreferenced: stale)" : ""));
      if (!stale) equivalent_only = false;
    } else if (it->second != t) {
      r.differences.push_back("chain " + n + ": differs");
      equivalent_only = false;
    }
  }
  for (const auto& [n, t] : cb)
    if (!ca.count(n)) r.differences.push_back("chain " + n + ": only after full"), equivalent_only = false;
  for (const auto& [n, t] : sa) {
    auto it = sb.find(n);
    if (it == sb.end()) r.differences.push_back("set " + n + ": only after partial"), equivalent_only = false;
    else if (it->second != t) r.differences.push_back("set " + n + ": differs"), equivalent_only = false;
  }
  for (const auto& [n, t] : sb)
    if (!sa.count(n)) r.differences.push_back("set " + n + ": only after full"), equivalent_only = false;
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
