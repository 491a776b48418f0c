#include "applier/node/dataplane.h"

#include "applier/core/repair.h"

namespace kpc::applier {

namespace vn = verifier::nft;

ModelDataplane::ModelDataplane(verifier::Flavor flavor) : flavor_(flavor) {}

verifier::RulesetState& ModelDataplane::iptables(IPFamily f) {
  int k = f == IPFamily::V4 ? 0 : 1;
  auto it = ipt_.find(k);
  if (it == ipt_.end()) {
    // A node's tables as iptables-save lists them before anything was added.
    verifier::RulesetState s = verifier::RulesetState::empty(f);
    std::string err;
    verifier::load_save("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
                        "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
                        ":POSTROUTING ACCEPT [0:0]\nCOMMIT\n",
                        f, flavor_, s, &err);
    it = ipt_.emplace(k, std::move(s)).first;
  }
  return it->second;
}

std::string ModelDataplane::save(IPFamily f) { return verifier::print_save(iptables(f), flavor_); }

static vn::Family nft_family(IPFamily f) { return f == IPFamily::V4 ? vn::Family::Ip : vn::Family::Ip6; }

DataplaneResult ModelDataplane::read(BackendKind kind, IPFamily family, std::string* out) {
  ++reads;
  if (kind == BackendKind::IPTables) {
    *out = save(family);
    return {};
  }
  out->clear();
  const vn::Table* t = nft(family).find_table(nft_family(family), "kube-proxy");
  if (!t) return {};
  vn::NftState one;
  one.tables.push_back(*t);
  *out = vn::print_ruleset(one);
  return {};
}

DataplaneResult ModelDataplane::apply(BackendKind kind, IPFamily family, const std::string& program) {
  if (fail_next_applies > 0) {
    --fail_next_applies;
    applied.push_back({kind, family, program, false});
    return DataplaneResult::failure("injected failure (ModelDataplane)");
  }
  DataplaneResult res;
  if (kind == BackendKind::IPTables) {
    verifier::RulesetState copy = iptables(family);
    verifier::ApplyOptions o;
    o.noflush = true;
    o.flavor = flavor_;
    auto r = verifier::apply_text(copy, program, o);
    if (r.ok()) iptables(family) = std::move(copy);
    else res = DataplaneResult::failure(r.error->message);
  } else {
    vn::NftState copy = nft(family);
    auto r = vn::apply_script(copy, program, "-");
    if (r.ok) nft(family) = std::move(copy);
    else res = DataplaneResult::failure(r.error ? r.error->render() : "nft failed");
  }
  applied.push_back({kind, family, program, res.ok});
  return res;
}

DataplaneResult ModelDataplane::ensure_jumps(IPFamily family, const ChainSet& targets, size_t* inserted) {
  if (inserted) *inserted = 0;
  std::string decl[2];
  for (const auto& [t, c] : targets) decl[t == ir::TableId::Nat] += ":" + c + " - [0:0]\n";
  std::string fake = "*filter\n" + decl[0] + "COMMIT\n*nat\n" + decl[1] + "COMMIT\n";
  auto& st = iptables(family);
  std::string prog[2];
  for (const auto& j : missing_jumps(st, fake)) prog[j.table == ir::TableId::Nat] += "-I " + j.chain + " 1 " + j.rule + "\n";
  std::string text;
  if (!prog[0].empty()) text += "*filter\n" + prog[0] + "COMMIT\n";
  if (!prog[1].empty()) text += "*nat\n" + prog[1] + "COMMIT\n";
  if (text.empty()) return {};
  verifier::ApplyOptions o;
  o.noflush = true;
  o.flavor = flavor_;
  auto r = verifier::apply_text(st, text, o);
  if (!r.ok()) return DataplaneResult::failure(r.error->message);
  if (inserted)
    for (char c : text) *inserted += c == '\n';
  if (inserted) *inserted -= (prog[0].empty() ? 0 : 2) + (prog[1].empty() ? 0 : 2);
  return {};
}

}  // namespace kpc::applier
