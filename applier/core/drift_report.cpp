#include "applier/core/drift_report.h"

#include <nlohmann/json.hpp>

#include "verifier/sem/report.h"

namespace kpc::applier {

namespace {

namespace sem = verifier::sem;

std::string header(const DriftReport& r, const DriftReportContext& c) {
  std::string s = "kpc drift " + c.snapshot + " against " + c.state + " (" + c.backend + ", " + c.flavor +
                  ", local addresses:";
  for (const auto& a : c.local_addresses) s += " " + a.str();
  s += ")\n";
  if (!r.drift()) {
    s += "no drift: kube-proxy's " + std::to_string(r.chains_compared) +
         " chains and its jumps from the built-in chains are as a full sync would leave them\n";
    return s;
  }
  size_t missing = 0, changed = 0, stale = 0;
  for (const auto& d : r.chains)
    (d.kind == ChainDrift::Kind::Missing ? missing : d.kind == ChainDrift::Kind::Stale ? stale : changed)++;
  s += "drift: " + std::to_string(changed) + " chains changed, " + std::to_string(missing) + " missing, " +
       std::to_string(stale) + " stale, " + std::to_string(r.jumps.size()) + " jump rules missing (of " +
       std::to_string(r.chains_compared) + " kube-proxy chains)\n";
  return s;
}

// "shop/cart: 4 packet classes treated differently (e.g. tcp ... -> 10.96.30.30:9000: on the node ACCEPT, a full
// sync: DNAT 10.244.1.30:9000 33.3%)"
std::string drift_service_summary(const sem::CompareResult& p, bool verbose) {
  std::string s;
  if (p.differing_classes == 0 && p.undecided_classes == 0)
    return p.sampled ? "no packet of the sampled destinations is treated differently\n"
                     : "no packet is treated differently (only unreachable rules differ)\n";
  if (p.sampled) s += verbose ? "  (" + p.narrowing + ")\n" : "  (a sample of the destinations: --max-atoms)\n";
  for (const auto& [svc, diffs] : sem::differences_by_service(p)) {
    size_t undecided = 0;
    for (const auto* d : diffs) undecided += d->undecided;
    s += "  " + svc + ": " + std::to_string(diffs.size() - undecided) + " packet classes treated differently";
    if (undecided) s += ", " + std::to_string(undecided) + " undecided";
    s += "\n    e.g. " + diffs[0]->witness_text + "\n";
    auto show = [](const std::vector<sem::OutcomeShare>& v) {
      std::string o;
      size_t n = 0;
      for (const auto& x : v) {
        if (++n > 3) {
          o += "; ... " + std::to_string(v.size() - 3) + " more";
          break;
        }
        if (!o.empty()) o += "; ";
        char pct[32];
        std::snprintf(pct, sizeof pct, "%.1f%%", x.probability.to_double() * 100);
        o += std::string(pct) + " " + sem::format_outcome(x);
      }
      return o;
    };
    s += "    on the node: " + show(diffs[0]->before) + "\n";
    s += "    after a full sync: " + show(diffs[0]->after) + "\n";
  }
  return s;
}

}  // namespace

std::string drift_text(const DriftReport& r, const DriftReportContext& c) {
  std::string s = header(r, c);
  if (!r.drift()) return s;
  s += "\nServices:\n" + drift_service_summary(r.packets, c.verbose);
  if (!r.jumps.empty()) {
    s += "\nkube-proxy's jump rules missing from the built-in chains:\n";
    for (const auto& j : r.jumps)
      s += std::string("  ") + ir::table_name(j.table) + ": -A " + j.chain + " " + j.rule + "\n";
  }
  for (const auto& d : r.chains) {
    s += std::string("\n") + chain_drift_kind_name(d.kind) + ": " + ir::table_name(d.table) + " " + d.chain;
    if (d.kind == ChainDrift::Kind::Changed)
      s += d.reordered ? " (same rules, another order)"
                       : " (" + std::to_string(d.missing_rules.size()) + " missing, " +
                             std::to_string(d.extra_rules.size()) + " extra)";
    s += "\n";
    if (!c.verbose) continue;
    for (const auto& l : d.missing_rules) s += "  - " + l + "\n";
    for (const auto& l : d.extra_rules) s += "  + " + l + "\n";
  }
  if (!c.verbose && !r.chains.empty()) s += "(--verbose lists the rules of each chain)\n";
  s += "\nrepair: " + std::to_string(r.repair_stats.chains_written) + " chains rewritten, " +
       std::to_string(r.repair_stats.chains_deleted) + " deleted, " + std::to_string(r.repair_stats.jumps_restored) +
       " jump rules restored (" + std::to_string(r.repair.size()) + " bytes; -o FILE writes it)\n";
  sem::ReportOptions ro;
  ro.before_name = "node";
  ro.after_name = "full sync";
  ro.verbose = c.verbose;
  s += "\nPacket classes (the node as it is -> after the repair):\n" + sem::diff_text(r.packets, ro);
  return s;
}

std::string drift_json(const DriftReport& r, const DriftReportContext& c) {
  nlohmann::ordered_json j;
  j["schema"] = "kpc.dev/drift/v1";
  j["snapshot"] = c.snapshot;
  j["state"] = c.state;
  j["backend"] = c.backend;
  j["flavor"] = c.flavor;
  j["local_addresses"] = nlohmann::ordered_json::array();
  for (const auto& a : c.local_addresses) j["local_addresses"].push_back(a.str());
  j["drift"] = r.drift();
  j["chains_compared"] = r.chains_compared;
  j["chains"] = nlohmann::ordered_json::array();
  for (const auto& d : r.chains) {
    nlohmann::ordered_json x;
    x["table"] = ir::table_name(d.table);
    x["chain"] = d.chain;
    x["kind"] = chain_drift_kind_name(d.kind);
    x["missing_rules"] = d.missing_rules;
    x["extra_rules"] = d.extra_rules;
    x["reordered"] = d.reordered;
    j["chains"].push_back(std::move(x));
  }
  j["missing_jumps"] = nlohmann::ordered_json::array();
  for (const auto& m : r.jumps)
    j["missing_jumps"].push_back({{"table", ir::table_name(m.table)}, {"chain", m.chain}, {"rule", m.rule}});
  sem::ReportOptions ro;
  ro.before_name = "node";
  ro.after_name = "full_sync";
  j["packets"] = r.drift() ? sem::diff_json_object(r.packets, ro) : nlohmann::ordered_json(nullptr);
  j["repair"] = {{"chains_written", r.repair_stats.chains_written},
                 {"chains_deleted", r.repair_stats.chains_deleted},
                 {"jumps_restored", r.repair_stats.jumps_restored},
                 {"program", r.repair}};
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string drift_markdown(const DriftReport& r, const DriftReportContext& c) {
  std::string s = "### kpc drift: " + std::string(r.drift() ? "the node differs from a full sync" : "no drift") + "\n\n";
  s += "`" + c.snapshot + "` against `" + c.state + "` (" + c.backend + ", " + c.flavor + ")\n\n";
  if (!r.drift()) return s;
  sem::ReportOptions ro;
  ro.before_name = "on the node";
  ro.after_name = "after a full sync";
  s += sem::diff_markdown(r.packets, ro);
  s += "\n<details><summary>" + std::to_string(r.chains.size()) + " chains, " + std::to_string(r.jumps.size()) +
       " jump rules</summary>\n\n```\n";
  for (const auto& j : r.jumps)
    s += std::string("missing jump: ") + ir::table_name(j.table) + " -A " + j.chain + " " + j.rule + "\n";
  for (const auto& d : r.chains) {
    s += std::string(chain_drift_kind_name(d.kind)) + ": " + ir::table_name(d.table) + " " + d.chain + "\n";
    for (const auto& l : d.missing_rules) s += "  - " + l + "\n";
    for (const auto& l : d.extra_rules) s += "  + " + l + "\n";
  }
  s += "```\n</details>\n";
  return s;
}

}  // namespace kpc::applier
