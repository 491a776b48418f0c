#include "applier/core/repair.h"

#include <algorithm>

#include "verifier/parse/parser.h"
#include "verifier/trace/tracer.h"
#include <map>
#include <set>

namespace kpc::applier {
namespace {

// One table of a restore program, grouped by chain, keeping the text of each line.
struct TableText {
  std::string name;
  std::vector<std::string> declared;                           ///< in program order
  std::map<std::string, std::vector<std::string_view>> rules;  ///< chain -> "-A ..." lines
  std::vector<std::string> deleted;                            ///< -X lines
};

std::vector<TableText> split_program(std::string_view text) {
  std::vector<TableText> tables;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '*') {
      tables.push_back({std::string(line.substr(1)), {}, {}, {}});
    } else if (tables.empty() || line == "COMMIT") {
      continue;
    } else if (line[0] == ':') {
      tables.back().declared.emplace_back(line.substr(1, line.find(' ') - 1));
    } else if (line.substr(0, 3) == "-A ") {
      size_t sp = line.find(' ', 3);
      tables.back().rules[std::string(line.substr(3, sp - 3))].push_back(line);
    } else if (line.substr(0, 3) == "-X ") {
      tables.back().deleted.emplace_back(line.substr(3));
    }
  }
  return tables;
}

bool same_chain(const verifier::Chain* a, const verifier::Chain* b) {
  return a && b && a->rules == b->rules && a->policy == b->policy;
}

}  // namespace

bool is_service_chain(std::string_view c) {
  for (std::string_view p : {"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"})
    if (c.substr(0, p.size()) == p) return true;
  return false;
}

ProgramChains program_chains(std::string_view program) {
  ProgramChains pc;
  for (const auto& t : split_program(program))
    if (auto id = ir::table_from_name(t.name)) {
      auto& d = pc.declared[*id];
      d.insert(d.end(), t.declared.begin(), t.declared.end());
      auto& x = pc.deleted[*id];
      x.insert(x.end(), t.deleted.begin(), t.deleted.end());
    }
  return pc;
}

std::vector<MissingJump> missing_jumps(const verifier::RulesetState& state, std::string_view full_program) {
  std::set<std::pair<ir::TableId, std::string>> managed;
  for (const auto& t : split_program(full_program))
    if (auto id = ir::table_from_name(t.name))
      for (const auto& c : t.declared) managed.insert({*id, c});
  std::vector<MissingJump> out;
  for (const auto& j : verifier::trace::kube_proxy_jumps()) {
    // Only jumps to chains this program writes (KUBE-FIREWALL is IPv4 and optional;
    // kubelet's chain of that name is not kube-proxy's business).
    if (!managed.count({j.table, j.to})) continue;
    std::string text = j.rule_text();
    auto rule = verifier::parse_rule_text("-A " + std::string(j.from) + " " + text, state.family);
    if (!rule) continue;
    uint32_t id = state.store->intern(*rule, state.family);
    const verifier::Chain* c = state.find(j.table, j.from);
    if (c && std::find(c->rules.begin(), c->rules.end(), id) != c->rules.end()) continue;
    out.push_back({j.table, j.from, std::move(text)});
  }
  return out;
}

RepairResult repair(const verifier::RulesetState& actual, std::string_view full_program, verifier::Flavor flavor) {
  RepairOptions o;
  o.flavor = flavor;
  return repair(actual, full_program, o);
}

RepairResult repair(const verifier::RulesetState& actual, std::string_view full_program, const RepairOptions& ro) {
  RepairResult r;
  verifier::ApplyOptions opts;
  opts.noflush = true;
  opts.flavor = ro.flavor;

  // The state a full restore would leave (same rule store, so chains compare by rule ids).
  verifier::RulesetState want = actual;
  if (auto res = verifier::apply_text(want, full_program, opts); !res.ok()) {
    r.error = "the full program does not apply to the actual state: line " + std::to_string(res.error->line) + ": " +
              res.error->reason;
    return r;
  }

  std::string out;
  for (const auto& t : split_program(full_program)) {
    auto id = ir::table_from_name(t.name);
    if (!id) continue;
    const auto& have = actual.table(*id);
    std::string decls, rules, deletes;
    std::set<std::string> declared(t.declared.begin(), t.declared.end());
    for (const auto& chain : t.declared) {
      if (std::find(t.deleted.begin(), t.deleted.end(), chain) != t.deleted.end()) continue;
      if (same_chain(actual.find(*id, chain), want.find(*id, chain))) {
        ++r.stats.chains_kept;
        continue;
      }
      decls += ":" + chain + " - [0:0]\n";
      ++r.stats.chains_written;
      auto it = t.rules.find(chain);
      if (it == t.rules.end()) continue;
      for (auto line : it->second) {
        rules.append(line).append("\n");
        ++r.stats.rules_written;
      }
    }
    // Stale per-service chains: present now, absent from the desired program.
    std::vector<std::string> stale;
    for (const verifier::Chain& chain : have.chains) {
      std::string name(chain.name);
      if (!chain.builtin && is_service_chain(name) && !declared.count(name)) stale.push_back(name);
    }
    for (const auto& name : t.deleted)
      if (actual.find(*id, name)) stale.push_back(name);
    std::sort(stale.begin(), stale.end());
    stale.erase(std::unique(stale.begin(), stale.end()), stale.end());
    for (const auto& name : stale) {
      decls += ":" + name + " - [0:0]\n";
      deletes += "-X " + name + "\n";
      ++r.stats.chains_deleted;
    }
    if (decls.empty()) continue;
    out += "*" + t.name + "\n" + decls + rules + deletes + "COMMIT\n";
  }

  // kube-proxy's jumps from the built-in chains, each inserted at the top in its
  // order (after the chains they jump to exist).
  std::vector<MissingJump> jumps;
  if (ro.ensure_jumps) jumps = missing_jumps(actual, full_program);
  for (ir::TableId tid : {ir::TableId::Filter, ir::TableId::Nat}) {
    std::string block;
    for (const auto& j : jumps)
      if (j.table == tid) {
        block += "-I " + j.chain + " 1 " + j.rule + "\n";
        ++r.stats.jumps_restored;
      }
    if (!block.empty()) out += "*" + std::string(ir::table_name(tid)) + "\n" + block + "COMMIT\n";
  }

  // Check the repair: actual + repair must equal actual + full for every chain the
  // full program manages, and leave no stale per-service chain behind.
  verifier::RulesetState got = actual;
  if (auto res = verifier::apply_text(got, out, opts); !res.ok()) {
    r.error = "the repair program would fail at line " + std::to_string(res.error->line) + ": " + res.error->reason;
    return r;
  }
  for (const auto& t : split_program(full_program)) {
    auto id = ir::table_from_name(t.name);
    if (!id) continue;
    for (const auto& chain : t.declared)
      if (!same_chain(got.find(*id, chain), want.find(*id, chain)) && want.find(*id, chain)) {
        r.error = "internal: repair leaves chain " + chain + " different from the full program";
        return r;
      }
    std::set<std::string> declared(t.declared.begin(), t.declared.end());
    for (const verifier::Chain& chain : got.table(*id).chains)
      if (std::string name(chain.name); is_service_chain(name) && !declared.count(name) && !chain.builtin) {
        r.error = "internal: repair leaves stale chain " + name;
        return r;
      }
  }
  if (ro.ensure_jumps && !missing_jumps(got, full_program).empty()) {
    r.error = "internal: repair leaves a kube-proxy jump rule missing";
    return r;
  }
  r.ok = true;
  r.program = std::move(out);
  return r;
}

}  // namespace kpc::applier
