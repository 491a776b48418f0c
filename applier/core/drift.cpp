#include "applier/core/drift.h"

#include <algorithm>
#include <map>
#include <set>

#include "verifier/symbolic/compare.h"

namespace kpc::applier {

const char* chain_drift_kind_name(ChainDrift::Kind k) {
  switch (k) {
    case ChainDrift::Kind::Missing: return "missing";
    case ChainDrift::Kind::Changed: return "changed";
    case ChainDrift::Kind::Stale: return "stale";
  }
  return "?";
}

namespace {

std::string rule_line(const verifier::RulesetState& st, std::string_view chain, uint32_t id) {
  return "-A " + std::string(chain) + std::string(st.store->text(id));
}

// Multiset difference of two chains' rule ids: what `want` has that `have` lacks, and back.
void rule_differences(const verifier::RulesetState& st, std::string_view chain, const std::vector<uint32_t>& have,
                      const std::vector<uint32_t>& want, ChainDrift* d) {
  std::map<uint32_t, long> count;
  for (uint32_t id : want) ++count[id];
  for (uint32_t id : have) --count[id];
  // In the order each side has them, so the report reads like the chain.
  std::map<uint32_t, long> left = count;
  for (uint32_t id : want)
    if (left[id] > 0) --left[id], d->missing_rules.push_back(rule_line(st, chain, id));
  left = count;
  for (uint32_t id : have)
    if (left[id] < 0) ++left[id], d->extra_rules.push_back(rule_line(st, chain, id));
  d->reordered = d->missing_rules.empty() && d->extra_rules.empty();
}

}  // namespace

DriftReport check_drift(const verifier::RulesetState& actual, std::string_view full_program, const DriftOptions& opt) {
  DriftReport rep;
  verifier::ApplyOptions ao;
  ao.noflush = true;
  ao.flavor = opt.flavor;
  // What a full sync would leave (same rule store: chains compare by rule ids).
  verifier::RulesetState want = actual;
  if (auto r = verifier::apply_text(want, full_program, ao); !r.ok()) {
    rep.error = "the full program does not apply to the node's state: line " + std::to_string(r.error->line) + ": " +
                r.error->reason;
    return rep;
  }
  ProgramChains pc = program_chains(full_program);
  for (const auto& [tid, declared] : pc.declared) {
    const auto& deleted = pc.deleted[tid];
    std::set<std::string> managed;
    for (const auto& c : declared)
      if (std::find(deleted.begin(), deleted.end(), c) == deleted.end()) managed.insert(c);
    for (const auto& c : managed) {
      ++rep.chains_compared;
      const verifier::Chain* have = actual.find(tid, c);
      const verifier::Chain* should = want.find(tid, c);
      if (!should) continue;
      if (!have) {
        ChainDrift d{tid, c, ChainDrift::Kind::Missing, {}, {}, false};
        for (uint32_t id : should->rules) d.missing_rules.push_back(rule_line(want, c, id));
        rep.chains.push_back(std::move(d));
      } else if (have->rules != should->rules) {
        ChainDrift d{tid, c, ChainDrift::Kind::Changed, {}, {}, false};
        rule_differences(want, c, have->rules, should->rules, &d);
        rep.chains.push_back(std::move(d));
      }
    }
    // Per-service chains the node keeps but kube-proxy would have deleted.
    for (const verifier::Chain& ch : actual.table(tid).chains) {
      std::string name(ch.name);
      if (ch.builtin || !is_service_chain(name) || managed.count(name)) continue;
      ChainDrift d{tid, name, ChainDrift::Kind::Stale, {}, {}, false};
      for (uint32_t id : ch.rules) d.extra_rules.push_back(rule_line(actual, name, id));
      rep.chains.push_back(std::move(d));
    }
  }
  std::sort(rep.chains.begin(), rep.chains.end(), [](const ChainDrift& a, const ChainDrift& b) {
    return std::tie(a.table, a.chain) < std::tie(b.table, b.chain);
  });
  rep.jumps = missing_jumps(actual, full_program);

  RepairOptions ro;
  ro.flavor = opt.flavor;
  ro.ensure_jumps = true;
  RepairResult rr = repair(actual, full_program, ro);
  if (!rr.ok) {
    rep.error = rr.error;
    return rep;
  }
  rep.repair = rep.drift() ? rr.program : std::string();
  rep.repair_stats = rr.stats;

  // The consequence for packets: the node as it is against the node repaired. Foreign
  // rules are the same on both sides, so every difference is kube-proxy's part.
  if (rep.drift()) {
    verifier::RulesetState repaired = actual;
    if (auto r = verifier::apply_text(repaired, rr.program, ao); !r.ok()) {
      rep.error = "internal: the repair does not apply: line " + std::to_string(r.error->line) + ": " + r.error->reason;
      return rep;
    }
    verifier::sem::CompareOptions co;
    co.local_addresses = opt.local_addresses;
    co.max_reported = opt.max_reported;
    co.max_atoms = opt.max_atoms;
    co.ipsets = opt.ipsets;
    rep.packets = verifier::symbolic::compare_states(actual, repaired, co);
  }
  rep.ok = true;
  return rep;
}

}  // namespace kpc::applier
