#include "verifier/equiv/verify.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "verifier/sem/report.h"
#include "verifier/symbolic/compare.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier {
namespace {

// kube-proxy links these from the built-in chains with individual iptables -I commands,
// outside any restore program (kubeproxy-iptables.md section 3), so a state built from
// restore programs alone lacks those jumps. Treating them as entry points is the safe
// direction: more reachable chains can only turn "equivalent" into "differs".
bool kube_proxy_entry(ir::TableId t, const std::string& chain) {
  if (t == ir::TableId::Nat) return chain == "KUBE-SERVICES" || chain == "KUBE-POSTROUTING";
  if (t == ir::TableId::Filter)
    return chain == "KUBE-SERVICES" || chain == "KUBE-EXTERNAL-SERVICES" || chain == "KUBE-NODEPORTS" ||
           chain == "KUBE-FORWARD" || chain == "KUBE-PROXY-FIREWALL" || chain == "KUBE-FIREWALL";
  return false;
}

// Chains reachable from the entry points of a table, following jumps and gotos.
std::set<std::string> reachable(const TableState& t, const RuleStore& store) {
  std::set<std::string> seen;
  std::vector<std::string> work;
  for (const Chain& chain : t.chains)
    if (std::string name(chain.name); chain.builtin || kube_proxy_entry(t.id, name)) work.push_back(name), seen.insert(name);
  while (!work.empty()) {
    const Chain* c = t.find(store, work.back());
    work.pop_back();
    if (!c) continue;
    for (uint32_t id : c->rules) {
      const std::string& j = store.jump(id);
      if (!j.empty() && seen.insert(j).second) work.push_back(j);
    }
  }
  return seen;
}

// "ns/name:port" of a kube-proxy comment ("ns/svc:p80 cluster IP", "ns/svc:p80 -> 10.0.0.1:80", ...).
void services_of(const Chain* c, const RuleStore& store, std::set<std::string>& out) {
  if (!c) return;
  for (uint32_t id : c->rules) {
    const std::string_view text = store.text(id);
    size_t p = text.find("--comment ");
    if (p == std::string::npos) continue;
    p += 10;
    if (p < text.size() && text[p] == '"') ++p;
    size_t e = text.find_first_of(" \"", p);
    std::string word(text.substr(p, e == std::string::npos ? std::string::npos : e - p));
    if (word.find('/') != std::string::npos) out.insert(word);
  }
}

const char* kind_text(ChainDiff::Kind k) {
  switch (k) {
    case ChainDiff::TablePresence: return "table presence differs";
    case ChainDiff::OnlyInA: return "only after partial";
    case ChainDiff::OnlyInB: return "only after full";
    case ChainDiff::Policy: return "policy differs";
    case ChainDiff::Rules: return "rules differ";
  }
  return "?";
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Identical: return "identical";
    case Verdict::Equivalent: return "equivalent";
    case Verdict::NotEquivalent: return "not equivalent";
    case Verdict::CannotProve: return "cannot prove";
    case Verdict::FailsToApply: return "fails to apply";
  }
  return "?";
}

VerifyResult verify(RulesetState prior, std::string_view partial, std::string_view full, Flavor flavor,
                    const VerifyOptions& vo) {
  VerifyResult r;
  ApplyOptions opts;
  opts.noflush = true;
  opts.flavor = flavor;
  opts.discard_on_failure = true;  // a failing side is reported, its state never looked at
  const bool prior_builtins_empty = trace::builtin_chains_empty(prior);
  // Both sides share the prior's rule store: chains compare by rule ids, and the lines
  // the prior was read from are known (not parsed again) in the partial and the full.
  RulesetState b = prior;
  RulesetState& a = prior;
  if (auto res = apply_text(b, full, opts); !res.ok()) {
    r.verdict = Verdict::FailsToApply;
    r.failure = res.error;
    r.failing_program = "full";
    return r;
  }
  if (auto res = apply_text(a, partial, opts); !res.ok()) {
    r.verdict = Verdict::FailsToApply;
    r.failure = res.error;
    r.failing_program = "partial";
    return r;
  }
  auto diffs = diff_states(a, b);
  if (diffs.empty()) return r;
  r.verdict = Verdict::Equivalent;
  // Reachable chains per table and side, computed once (a large-cluster partial differs in thousands of chains).
  std::map<std::pair<int, int>, std::set<std::string>> reach;
  auto reachable_in = [&](int side, ir::TableId t) -> const std::set<std::string>& {
    auto key = std::make_pair(side, static_cast<int>(t));
    auto it = reach.find(key);
    if (it == reach.end()) {
      const RulesetState& st = side ? b : a;
      it = reach.emplace(key, reachable(st.table(t), *st.store)).first;
    }
    return it->second;
  };
  for (const auto& d : diffs) {
    ChainDifference cd{d.table, d.chain, kind_text(d.kind), false, {}};
    if (d.kind == ChainDiff::TablePresence) {
      cd.reachable = true;
    } else {
      cd.reachable = reachable_in(0, d.table).count(d.chain) || reachable_in(1, d.table).count(d.chain);
      std::set<std::string> services;
      services_of(a.find(d.table, d.chain), *a.store, services);
      services_of(b.find(d.table, d.chain), *b.store, services);
      cd.services.assign(services.begin(), services.end());
    }
    if (cd.reachable) r.verdict = Verdict::NotEquivalent;
    r.differences.push_back(std::move(cd));
  }
  if (r.verdict == Verdict::Equivalent) return r;
  // Level 2: does any packet see the difference? The full program's state is the reference.
  if (vo.kube_proxy_jumps && prior_builtins_empty) {
    trace::add_kube_proxy_jumps(a);
    trace::add_kube_proxy_jumps(b);
  }
  sem::CompareOptions co;
  co.local_addresses = vo.local_addresses;
  co.ipsets = vo.ipsets;
  r.behaviour = symbolic::compare_states(b, a, co);
  if (r.behaviour->differing_classes)
    r.verdict = Verdict::NotEquivalent;
  else if (r.behaviour->undecided_classes)
    r.verdict = Verdict::CannotProve;
  else
    r.verdict = Verdict::Equivalent;
  return r;
}

std::string format_text(const VerifyResult& r, bool verbose) {
  std::string out = std::string("verdict: ") + verdict_name(r.verdict) + "\n";
  if (r.failure)
    out += "the " + r.failing_program + " program fails at line " + std::to_string(r.failure->line) + ": " +
           r.failure->reason + "\n  the real tool would say: " + r.failure->message + "\n";
  for (const auto& d : r.differences) {
    out += std::string("  ") + ir::table_name(d.table) + "/" + d.chain + ": " + d.kind +
           (d.reachable ? " (reachable: may change packets)" : " (unreachable: no packet can see it)");
    if (!d.services.empty()) {
      out += " [";
      for (size_t i = 0; i < d.services.size(); ++i) out += (i ? ", " : "") + d.services[i];
      out += "]";
    }
    out += "\n";
  }
  if (r.behaviour) out += sem::verify_behaviour_text(*r.behaviour, verbose);
  return out;
}

std::string format_markdown(const VerifyResult& r) {
  std::string out = std::string("### kpc verify: ") + verdict_name(r.verdict) + "\n\n";
  if (r.failure)
    out += "The " + r.failing_program + " program fails at line " + std::to_string(r.failure->line) + ": `" +
           r.failure->reason + "`\n\n";
  if (!r.differences.empty()) {
    out += "| table/chain | difference | reachable | services |\n|---|---|---|---|\n";
    for (const auto& d : r.differences) {
      std::string svcs;
      for (size_t i = 0; i < d.services.size(); ++i) svcs += (i ? ", " : "") + d.services[i];
      out += std::string("| ") + ir::table_name(d.table) + "/" + d.chain + " | " + d.kind + " | " +
             (d.reachable ? "yes" : "no") + " | " + svcs + " |\n";
    }
    out += "\n";
  }
  if (r.behaviour) {
    sem::ReportOptions ro;
    ro.before_name = "full";
    ro.after_name = "partial";
    out += sem::diff_markdown(*r.behaviour, ro);
  }
  return out;
}

std::string format_json(const VerifyResult& r) {
  nlohmann::json j;
  j["schema"] = "kpc.dev/verify/v1";
  j["verdict"] = verdict_name(r.verdict);
  if (r.failure)
    j["failure"] = {{"program", r.failing_program}, {"line", r.failure->line}, {"reason", r.failure->reason},
                    {"message", r.failure->message}};
  j["differences"] = nlohmann::json::array();
  for (const auto& d : r.differences)
    j["differences"].push_back({{"table", ir::table_name(d.table)},
                                {"chain", d.chain},
                                {"kind", d.kind},
                                {"reachable", d.reachable},
                                {"services", d.services}});
  if (r.behaviour) {
    const auto& b = *r.behaviour;
    nlohmann::json jb;
    jb["differing_classes"] = b.differing_classes;
    jb["undecided_classes"] = b.undecided_classes;
    jb["narrowing"] = b.narrowing;
    jb["witnesses"] = nlohmann::json::array();
    for (const auto& d : b.differences)
      jb["witnesses"].push_back(nlohmann::json::parse(sem::difference_json(d, "full", "partial").dump()));
    jb["self_check_failures"] = b.self_check_failures;
    j["packets"] = jb;
  }
  return j.dump(2) + "\n";
}

}  // namespace kpc::verifier
