#include "verifier/nft_sym/compare.h"

#include <algorithm>
#include <iterator>
#include <memory>

#include "verifier/nft_sym/explorer.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/trace/effects.h"

namespace kpc::verifier::nft_sym {

using sem::Leaf;
using sem::Origin;
using sem::PacketClass;
using sem::Universe;
using sem::Witness;
using sem::CompareResult;
using sem::OutcomeShare;

namespace {

bool sees(nft::Family f, IPFamily fam) {
  return f == nft::Family::Inet || (fam == IPFamily::V4 ? f == nft::Family::Ip : f == nft::Family::Ip6);
}

// An exact dyadic fraction as a Probability (kernel numgen shares are dyadic); nullopt if
// it is not (or does not fit the conversion).
std::optional<trace::Probability> dyadic(const nft_trace::Fraction& f) {
  if (f.is_zero()) return trace::Probability::zero();
  int k = f.denominator_log2();
  uint64_t n = 0;
  if (k < 0 || k > 63 || !f.numerator().to_u64(&n)) return std::nullopt;
  return trace::Probability::ratio_pow2(n, static_cast<uint32_t>(k));
}

class NftSide : public sem::CompareSide {
 public:
  NftSide(const nft::NftState& s, Universe& u, const sem::CompareOptions& opt)
      : u_(u), explorer_(s, u), tracer_(s, tracer_options(opt)) {}
  std::vector<Leaf> explore(const PacketClass& start, Origin origin) override {
    return explorer_.explore(start, origin);
  }
  trace::Packet concrete(const Witness& w, Origin origin) const override {
    trace::Packet p;
    p.src = w.src;
    p.dst = w.dst;
    p.proto = w.proto;
    p.sport = w.sport;
    p.dport = w.dport;
    p.origin = origin == Origin::Node ? trace::Origin::Node : trace::Origin::External;
    if (origin == Origin::Arriving && w.in_iface >= 0) p.in_iface = u_.ifaces[static_cast<size_t>(w.in_iface)];
    if (w.out_iface >= 0) p.out_iface = u_.ifaces[static_cast<size_t>(w.out_iface)];
    p.mark = w.mark;
    p.ctstate = sem::ct_combo_bits(w.ct_combo);
    if (w.client != 0) {
      p.remembered = explorer_.sets_for(w.client);
      p.remembered_age = u_.age_bucket_start(w.age_bucket);
    }
    return p;
  }
  std::vector<OutcomeShare> trace(const trace::Packet& tp, std::vector<std::string>* services,
                                  std::vector<std::string>* path) override {
    nft_trace::Packet p;
    p.src = tp.src;
    p.dst = tp.dst;
    p.proto = tp.proto;
    p.sport = tp.sport;
    p.dport = tp.dport;
    p.origin = tp.origin;
    p.in_iface = tp.in_iface;
    p.out_iface = tp.out_iface;
    p.mark = tp.mark;
    p.ctstate = tp.ctstate;
    p.remembered = tp.remembered;
    p.remembered_age = tp.remembered_age;
    auto r = tracer_.trace(p);
    std::vector<OutcomeShare> out;
    const nft_trace::Outcome* best = nullptr;
    for (const auto& o : r.outcomes) {
      for (const auto& sv : o.services)
        if (std::find(services->begin(), services->end(), sv) == services->end()) services->push_back(sv);
      if (!best || o.probability > best->probability) best = &o;
      OutcomeShare s;
      s.verdict = o.verdict;
      s.route = o.route;
      s.dnat = o.dnat_text;
      s.masquerade = o.masquerade;
      s.snat = o.snat_text;
      s.mark = o.final_mark;
      s.options = o.options;
      for (const auto& a : o.affinity) trace::append_effect(&s.affinity, a);
      s.unknown = o.unknown_reason;
      auto pr = dyadic(o.probability);
      if (!pr) {  // cannot be shown as the symbolic side shows it: the self-check will say so
        s.unknown = "probability " + o.probability.fraction() + " is not dyadic";
        s.verdict = trace::Verdict::Unknown;
        pr = trace::Probability::zero();
      }
      s.probability = *pr;
      auto it = std::find_if(out.begin(), out.end(), [&](const OutcomeShare& x) {
        return x.verdict == s.verdict && x.route == s.route && x.dnat == s.dnat && x.masquerade == s.masquerade &&
               x.snat == s.snat && x.mark == s.mark && x.options == s.options && x.affinity == s.affinity &&
               x.unknown == s.unknown;
      });
      if (it != out.end())
        it->probability = it->probability + s.probability;
      else
        out.push_back(std::move(s));
    }
    path->clear();
    if (best)
      for (const auto& st : best->path) path->push_back(st.table + " " + st.chain + ": " + st.text);
    return out;
  }

 private:
  static nft_trace::TraceOptions tracer_options(const sem::CompareOptions& opt) {
    nft_trace::TraceOptions to;
    to.local_addresses = opt.local_addresses;
    to.kernel_numgen = true;  // the explorer's shares (explorer.h)
    return to;
  }
  Universe& u_;
  Explorer explorer_;
  nft_trace::Tracer tracer_;
};

}  // namespace

std::unique_ptr<sem::CompareSide> make_side(const nft::NftState& state, Universe& u, const sem::CompareOptions& opt) {
  return std::make_unique<NftSide>(state, u, opt);
}

std::vector<IPFamily> families(const nft::NftState& a, const nft::NftState& b) {
  std::vector<IPFamily> out;
  for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
    bool any = false;
    for (const auto* s : {&a, &b})
      for (const auto& t : s->tables) any = any || sees(t.family, f);
    if (any) out.push_back(f);
  }
  return out;
}

CompareResult compare_nft_states(const nft::NftState& before, const nft::NftState& after, IPFamily family,
                                 const sem::CompareOptions& opt) {
  CompareResult res;
  Universe u = build_universe({&before, &after}, family, opt.local_addresses);
  res.atoms = u.atom_count();
  if (!opt.explore_all && nft::same_listing(before, after)) {
    res.equivalent_by_hash = true;
    res.narrowing = "the two rule sets list alike (`nft list ruleset`, handles aside)";
    return res;
  }
  sem::AffectedAtoms aff;
  if (opt.explore_all) {
    aff.all = true;
    aff.atom.assign(u.atom_count(), 1);
    aff.why_all = "every atom requested";
  } else {
    aff = affected_atoms_nft(before, after, u);
  }
  NftSide a(before, u, opt), b(after, u, opt);
  return sem::compare_sides(u, a, b, std::move(aff), opt);
}

CompareResult compare_nft(const nft::NftState& before, const nft::NftState& after,
                          const sem::CompareOptions& opt) {
  CompareResult all;
  bool first = true;
  for (IPFamily f : families(before, after)) {
    CompareResult r = compare_nft_states(before, after, f, opt);
    if (first) {
      all = std::move(r);
      first = false;
      continue;
    }
    all.equivalent_by_hash = all.equivalent_by_hash && r.equivalent_by_hash;
    all.atoms += r.atoms;
    all.atoms_explored += r.atoms_explored;
    all.classes_compared += r.classes_compared;
    all.leaves += r.leaves;
    all.differing_classes += r.differing_classes;
    all.undecided_classes += r.undecided_classes;
    all.sampled = all.sampled || r.sampled;
    all.narrowing += "; IPv6: " + r.narrowing;
    for (auto& d : r.differences) all.differences.push_back(std::move(d));
    std::vector<std::string> services;
    std::set_union(all.services_differing.begin(), all.services_differing.end(), r.services_differing.begin(),
                   r.services_differing.end(), std::back_inserter(services));
    all.services_differing = std::move(services);
    for (auto& s : r.self_check_failures) all.self_check_failures.push_back(std::move(s));
  }
  if (first) {
    all.equivalent_by_hash = true;
    all.narrowing = "no ip, ip6 or inet table on either side";
  }
  std::stable_sort(all.differences.begin(), all.differences.end(),
                   [](const auto& a, const auto& b) { return a.undecided < b.undecided; });
  return all;
}

}  // namespace kpc::verifier::nft_sym
