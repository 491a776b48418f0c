#include "verifier/symbolic/compare.h"

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>

#include "verifier/symbolic/affinity_lists.h"

namespace kpc::verifier::symbolic {

using sem::AffectedAtoms;
using sem::CompareOptions;
using sem::CompareResult;
using sem::CompareSide;
using sem::Leaf;
using sem::Origin;
using sem::OutcomeShare;
using sem::PacketClass;
using sem::Universe;
using sem::Witness;

namespace {

// The concrete tracer's distribution at the witness, in the same shape; its recent
// lists named by their canonical keys (keys: list -> key, affinity_list_keys).
std::vector<OutcomeShare> concrete_shares(const trace::TraceResult& r,
                                          const std::unordered_map<std::string, std::string>& keys) {
  std::vector<OutcomeShare> out;
  auto label = [&](const std::string& list) {
    auto it = keys.find(list);
    return it != keys.end() ? it->second : "list " + list;
  };
  for (const auto& o : r.outcomes) {
    OutcomeShare s;
    s.verdict = o.verdict;
    s.route = o.route;
    s.dnat = o.dnat_text;
    s.masquerade = o.masquerade;
    s.snat = o.snat_text;
    s.mark = o.final_mark;
    s.options = o.options;
    s.affinity = trace::affinity_text(o.affinity, label);
    s.probability = o.probability;
    auto it = std::find_if(out.begin(), out.end(), [&](const OutcomeShare& x) {
      return x.verdict == s.verdict && x.route == s.route && x.dnat == s.dnat && x.masquerade == s.masquerade &&
             x.snat == s.snat && x.mark == s.mark && x.options == s.options && x.affinity == s.affinity;
    });
    if (it != out.end())
      it->probability = it->probability + s.probability;
    else
      out.push_back(std::move(s));
  }
  return out;
}

trace::Packet concrete(const Witness& w, Origin origin, const Universe& u, const Engine& e) {
  trace::Packet p;
  p.src = w.src;
  p.dst = w.dst;
  p.proto = w.proto;
  p.sport = w.sport;
  p.dport = w.dport;
  p.origin = origin == Origin::Node ? trace::Origin::Node : trace::Origin::External;
  if (origin == Origin::Arriving && w.in_iface >= 0) p.in_iface = u.ifaces[static_cast<size_t>(w.in_iface)];
  if (w.out_iface >= 0) p.out_iface = u.ifaces[static_cast<size_t>(w.out_iface)];
  if (origin == Origin::Arriving) {
    p.in_bridge_port = u.bridge_ports[w.bridge_in];
    p.out_bridge_port = u.bridge_ports[w.bridge_out];
  }
  p.mark = w.mark;
  p.ctstate = sem::ct_combo_bits(w.ct_combo);
  if (w.client != 0) {
    p.remembered = e.lists_for(w.client);
    p.remembered_age = u.age_bucket_start(w.age_bucket);
  }
  return p;
}

std::vector<std::string> best_path(const trace::TraceResult& r) {
  std::vector<std::string> out;
  const trace::Outcome* best = nullptr;
  for (const auto& o : r.outcomes)
    if (!best || o.probability > best->probability) best = &o;
  if (!best) return out;
  for (const auto& s : best->path) {
    if (s.kind == trace::Step::NotTaken) continue;
    out.push_back(std::string(ir::table_name(s.table)) + " " + s.text);
  }
  return out;
}

// The iptables front end of a comparison: the symbolic engine and the concrete tracer of
// one RulesetState.
class IptablesSide : public CompareSide {
 public:
  IptablesSide(const RulesetState& s, Universe& u, const CompareOptions& opt)
      : u_(u), engine_(s, u), tracer_(s, tracer_options(opt)), keys_(affinity_list_keys(s)) {}
  std::vector<Leaf> explore(const PacketClass& start, Origin origin) override {
    return engine_.explore(start, origin);
  }
  trace::Packet concrete(const Witness& w, Origin origin) const override {
    return symbolic::concrete(w, origin, u_, engine_);
  }
  std::vector<OutcomeShare> trace(const trace::Packet& p, std::vector<std::string>* services,
                                  std::vector<std::string>* path) override {
    auto r = tracer_.trace(p);
    for (const auto& o : r.outcomes)
      for (const auto& sv : o.services)
        if (std::find(services->begin(), services->end(), sv) == services->end()) services->push_back(sv);
    *path = best_path(r);
    return concrete_shares(r, keys_);
  }

 private:
  static trace::TraceOptions tracer_options(const CompareOptions& opt) {
    trace::TraceOptions to;
    to.local_addresses = opt.local_addresses;
    to.ipsets = opt.ipsets;
    return to;
  }
  Universe& u_;
  Engine engine_;
  trace::Tracer tracer_;
  std::unordered_map<std::string, std::string> keys_;
};

}  // namespace

std::unique_ptr<CompareSide> make_side(const RulesetState& state, Universe& u, const CompareOptions& opt) {
  return std::make_unique<IptablesSide>(state, u, opt);
}

PacketClass point_class(const trace::Packet& p, const Universe& u, const Engine& e) {
  return sem::point_class(p, u, p.remembered.empty() ? 0 : e.client_id(p.remembered[0]));
}

std::vector<OutcomeShare> concrete_distribution(const trace::TraceResult& r, const RulesetState& state) {
  return concrete_shares(r, affinity_list_keys(state));
}

CompareResult compare_states(const RulesetState& before, const RulesetState& after, const CompareOptions& opt) {
  CompareResult res;
  Universe u = build_universe({&before, &after}, opt.local_addresses, opt.ipsets);
  res.atoms = u.atom_count();
  AffectedAtoms aff;
  if (opt.explore_all) {
    aff.all = true;
    aff.atom.assign(u.atom_count(), 1);
    aff.why_all = "every atom requested";
  } else {
    aff = affected_atoms(before, after, u);
    if (aff.equal) {
      res.equivalent_by_hash = true;
      res.narrowing = "every built-in chain has the same semantic hash (comments and chain names aside)";
      return res;
    }
  }
  IptablesSide ea(before, u, opt), eb(after, u, opt);
  return sem::compare_sides(u, ea, eb, std::move(aff), opt);
}

}  // namespace kpc::verifier::symbolic
