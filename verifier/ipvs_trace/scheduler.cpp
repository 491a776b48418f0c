#include "verifier/ipvs_trace/scheduler.h"

#include "verifier/trace/tracer.h"

namespace kpc::verifier::ipvs_trace {
namespace {

std::string server_text(const ipvs::RealServer& rs) { return trace::host_port(rs.dest.address, rs.dest.port); }

// shares w_i / sum(w) over the servers with weight > 0 (all weights 1: 1/N each).
Schedule proportional(const std::vector<const ipvs::RealServer*>& live, bool by_weight) {
  Schedule s;
  uint64_t total = 0;
  for (const auto* rs : live) total += by_weight ? rs->weight : 1;
  if (total > 0xffffffffu) {
    s.why = "sum of the weights beyond 2^32 - 1";
    return s;
  }
  Fraction unit = Fraction::reciprocal(uint32_t(total));
  for (const auto* rs : live) {
    uint32_t w = by_weight ? rs->weight : 1;
    Fraction p = Fraction::zero();
    for (uint32_t k = 0; k < w && k < 65536; ++k) p = p + unit;  // weights are at most 65535 (ipvsadm)
    s.shares.push_back({rs, p});
  }
  return s;
}

}  // namespace

Schedule schedule(const ipvs::VirtualServer& vs, bool equal_shares_for_others) {
  std::vector<const ipvs::RealServer*> live;
  for (const auto& rs : vs.real_servers)
    if (rs.weight > 0) live.push_back(&rs);
  size_t draining = vs.real_servers.size() - live.size();
  std::string drained = draining ? "; " + std::to_string(draining) + " weight-0 (draining) server(s) get no new connection"
                                 : std::string();
  if (live.empty()) {
    Schedule s;
    s.note = "no real server with weight > 0" + drained;
    return s;
  }
  const std::string& sch = vs.scheduler;
  if (sch == "rr") {
    Schedule s = proportional(live, false);
    s.note = "rr: equal shares among " + std::to_string(live.size()) + " real server(s) with weight > 0" + drained;
    return s;
  }
  if (sch == "wrr") {
    Schedule s = proportional(live, true);
    s.note = "wrr: shares weight / sum of weights" + drained;
    return s;
  }
  if (sch == "fo") {
    const ipvs::RealServer* best = nullptr;
    for (const auto* rs : live)
      if (!best || rs->weight > best->weight) best = rs;
    Schedule s;
    s.shares.push_back({best, Fraction::one()});
    s.note = "fo: the first server of the highest weight" + drained;
    return s;
  }
  std::string cands;
  for (const auto* rs : live) cands += (cands.empty() ? "" : ", ") + server_text(*rs);
  if (equal_shares_for_others) {
    Schedule s = proportional(live, true);
    s.note = "scheduler " + sch + ": ASSUMED weight-proportional shares (idle servers, uniformly spread clients); the "
             "kernel's choice depends on connection counts or a hash of the client" + drained;
    return s;
  }
  Schedule s;
  s.why = "scheduler " + sch +
          " chooses by the servers' connection counts or a hash of the client, which the program does not give "
          "(candidates: " + cands + "; --ipvs-shares weighted assumes weight-proportional shares)";
  return s;
}

}  // namespace kpc::verifier::ipvs_trace
