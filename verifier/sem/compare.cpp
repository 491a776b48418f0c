#include "verifier/sem/compare.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "compiler/ir/rule.h"
#include "verifier/sem/port_buckets.h"
#include "verifier/trace/effects.h"

namespace kpc::verifier::sem {

using trace::Verdict;

namespace {

/// An outcome with its mark made concrete where the class fixes the arriving mark.
struct NormOutcome {
  SymOutcome o;
  bool operator<(const NormOutcome& x) const {
    auto key = [](const SymOutcome& s) {
      return std::tie(s.verdict, s.route, s.dnat, s.dnat_addr, s.dnat_port, s.masquerade, s.snat, s.mark_const,
                      s.mark_value, s.mark_flip, s.connmark, s.ct_const, s.ct_value, s.ct_flip, s.ct_from_mark, s.options,
                      s.affinity, s.unknown);
    };
    return key(o) < key(x.o);
  }
  bool operator==(const NormOutcome& x) const { return o == x.o; }
};

SymOutcome normalize(const SymOutcome& o, const PacketClass& c) {
  SymOutcome n = o;
  uint32_t fixed = c.mark_known & ~o.mark_const;  // free in the outcome, known in the class
  n.mark_value = (o.mark_value & o.mark_const) | ((c.mark_value ^ o.mark_flip) & fixed);
  n.mark_const = o.mark_const | fixed;
  n.mark_flip = o.mark_flip & ~n.mark_const;
  if (n.connmark) {  // connmark bits taken from the arriving mark, where the class fixes it
    uint32_t known = c.mark_known & o.ct_from_mark;
    n.ct_value = (o.ct_value & o.ct_const) | ((c.mark_value ^ o.ct_flip) & known);
    n.ct_const = o.ct_const | known;
    n.ct_from_mark = o.ct_from_mark & ~known;
    n.ct_flip = o.ct_flip & ~n.ct_const;
  }
  if (!n.dnat) n.dnat_addr = 0, n.dnat_port = 0;
  return n;
}

using Dist = std::vector<std::pair<NormOutcome, Probability>>;  // sorted by outcome, merged

void add_to(Dist& d, const NormOutcome& o, const Probability& p) {
  auto it = std::lower_bound(d.begin(), d.end(), o, [](const auto& e, const NormOutcome& x) { return e.first < x; });
  if (it != d.end() && it->first == o)
    it->second = it->second + p;
  else
    d.insert(it, {o, p});
}

Dist normalized(const Dist& d, const PacketClass& c) {
  Dist out;
  for (const auto& [o, p] : d) add_to(out, NormOutcome{normalize(o.o, c)}, p);
  return out;
}

bool has_unknown(const Dist& d) {
  for (const auto& e : d)
    if (e.first.o.verdict == Verdict::Unknown) return true;
  return false;
}

struct Region {
  PacketClass cls;
  Dist only_a, only_b;  ///< the unmatched leaves of each side holding this region
};

// Refines the start class by the leaves each side has and the other has not. Leaves
// both sides share (same class, probability and outcome) add the same to both
// distributions everywhere, so the distributions differ exactly where these sums do:
// a one-endpoint change in a 1,000-endpoint service refines by 2-4 leaves, not 2,000.
std::vector<Region> refine(const PacketClass& start, const std::vector<const Leaf*>& a,
                           const std::vector<const Leaf*>& b, const Universe& u) {
  std::vector<Region> regions{Region{start, {}, {}}};
  for (int side = 0; side < 2; ++side)
    for (const Leaf* l : side ? b : a) {
      std::vector<Region> next;
      next.reserve(regions.size() + 4);
      for (Region& r : regions) {
        if (!r.cls.overlaps(l->cls, u)) {
          next.push_back(std::move(r));
          continue;
        }
        PacketClass inter = r.cls.intersect(l->cls);
        for (auto& rest : r.cls.subtract(l->cls, u)) next.push_back(Region{std::move(rest), r.only_a, r.only_b});
        Region in{std::move(inter), std::move(r.only_a), std::move(r.only_b)};
        add_to(side ? in.only_b : in.only_a, NormOutcome{l->outcome}, l->prob);
        next.push_back(std::move(in));
      }
      regions = std::move(next);
    }
  return regions;
}

// One side's leaves of one start class, with what the questions asked per witness need at
// hand: the Unknown leaves and those testing predicates apart, and (for many leaves) the
// leaves by destination port. Every answer visits the leaves in their order, as a scan would.
class SideLeaves {
 public:
  /// Fewer leaves are simply scanned.
  static constexpr size_t kBucketFrom = 64;

  explicit SideLeaves(const std::vector<Leaf>& leaves) : leaves_(leaves), bucketed_(leaves.size() >= kBucketFrom) {
    for (uint32_t i = 0; i < leaves.size(); ++i) {
      if (leaves[i].outcome.verdict == Verdict::Unknown) unknown_.push_back(i);
      if (leaves[i].cls.pred_known) with_preds_.push_back(i);
      if (bucketed_) buckets_.add(i, leaves[i].cls.dport);
    }
  }

  /// f(leaf) for every leaf overlapping c, in the leaves' order.
  template <class F>
  void for_each_meeting(const PacketClass& c, const Universe& u, F&& f) const {
    if (bucketed_ && buckets_.collect(c.dport, &ids_)) {
      for (uint32_t i : ids_)
        if (leaves_[i].cls.overlaps(c, u)) f(leaves_[i]);
      return;
    }
    for (const Leaf& l : leaves_)
      if (l.cls.overlaps(c, u)) f(l);
  }
  bool unknown_meets(const PacketClass& c, const Universe& u) const {
    for (uint32_t i : unknown_)
      if (leaves_[i].cls.overlaps(c, u)) return true;
    return false;
  }
  /// The predicates tested by the leaves overlapping c.
  uint64_t preds_meeting(const PacketClass& c, const Universe& u) const {
    uint64_t dep = 0;
    for (uint32_t i : with_preds_)
      if (leaves_[i].cls.overlaps(c, u)) dep |= leaves_[i].cls.pred_known;
    return dep;
  }

 private:
  const std::vector<Leaf>& leaves_;
  bool bucketed_;
  std::vector<uint32_t> unknown_, with_preds_;
  PortBuckets buckets_;
  mutable std::vector<uint32_t> ids_;  // collect's answer (one question at a time)
};

// The class of exactly the witness packet.
PacketClass witness_class(const Witness& w, const Universe& u) {
  PacketClass c = PacketClass::everything(u);
  c.src = AddrSet::point(addr_value(w.src));
  c.dst = AddrSet::point(addr_value(w.dst));
  c.proto = ProtoSet::of(w.proto);
  c.sport = PortSet::point(w.sport);
  c.dport = PortSet::point(w.dport);
  c.ct = SmallSet::of(w.ct_combo);
  c.mark_known = ~0u;
  c.mark_value = w.mark;
  if (w.in_iface >= 0) c.in_iface = SmallSet::of(static_cast<unsigned>(w.in_iface));
  if (w.out_iface >= 0) c.out_iface = SmallSet::of(static_cast<unsigned>(w.out_iface));
  c.bridge_in = SmallSet::of(w.bridge_in);
  c.bridge_out = SmallSet::of(w.bridge_out);
  c.client = ClientSet::only(w.client);
  c.age = SmallSet::of(w.age_bucket);
  c.pred_known = u.all_preds();
  c.pred_value = w.preds;
  return c;
}

// The predicates the outcomes of the packets of class c depend on (either side).
uint64_t pred_deps(const SideLeaves& la, const SideLeaves& lb, PacketClass c, const Universe& u) {
  c.pred_known = 0;
  return la.preds_meeting(c, u) | lb.preds_meeting(c, u);
}

// Full distribution of the packets of class c (exact when c is one packet).
Dist full_dist(const SideLeaves& leaves, const PacketClass& c, const Universe& u) {
  Dist d;
  leaves.for_each_meeting(c, u, [&](const Leaf& l) { add_to(d, NormOutcome{normalize(l.outcome, c)}, l.prob); });
  return d;
}

// Each leaf as a canonical key: equal keys are the same leaf (class, probability, outcome).
std::vector<std::string> leaf_keys(const std::vector<Leaf>& leaves) {
  std::vector<std::string> keys;
  keys.reserve(leaves.size());
  for (const Leaf& l : leaves) {
    SymOutcome n = normalize(l.outcome, l.cls);
    std::string k = l.cls.key();
    k += '|';
    k += l.prob.numerator().raw();
    k += '/';
    k += std::to_string(l.prob.denominator_log2());
    char b[96];
    std::snprintf(b, sizeof b, "|%d|%d|%d|%x|%x|%x|", static_cast<int>(n.verdict), n.dnat, n.masquerade, n.mark_const,
                  n.mark_value, n.mark_flip);
    k += b;
    k += n.route + "|" + n.snat + "|" + n.options + "|" + n.affinity + "|" + n.unknown + "|";
    if (n.connmark) {
      std::snprintf(b, sizeof b, "ctm %x/%x/%x/%x|", n.ct_const, n.ct_value, n.ct_flip, n.ct_from_mark);
      k += b;
    }
    if (n.dnat) {
      k.append(reinterpret_cast<const char*>(&n.dnat_addr), sizeof n.dnat_addr);
      k += std::to_string(n.dnat_port);
    }
    keys.push_back(std::move(k));
  }
  return keys;
}

// Leaves of each side without an equal leaf on the other side (multiset difference).
void unmatched(const std::vector<Leaf>& la, const std::vector<Leaf>& lb, std::vector<const Leaf*>* only_a,
               std::vector<const Leaf*>* only_b, std::vector<const Leaf*>* shared_unknown) {
  auto ka = leaf_keys(la), kb = leaf_keys(lb);
  std::vector<size_t> ia(la.size()), ib(lb.size());
  for (size_t i = 0; i < ia.size(); ++i) ia[i] = i;
  for (size_t i = 0; i < ib.size(); ++i) ib[i] = i;
  std::sort(ia.begin(), ia.end(), [&](size_t x, size_t y) { return ka[x] < ka[y]; });
  std::sort(ib.begin(), ib.end(), [&](size_t x, size_t y) { return kb[x] < kb[y]; });
  size_t x = 0, y = 0;
  while (x < ia.size() || y < ib.size()) {
    if (y == ib.size() || (x < ia.size() && ka[ia[x]] < kb[ib[y]])) {
      only_a->push_back(&la[ia[x++]]);
    } else if (x == ia.size() || kb[ib[y]] < ka[ia[x]]) {
      only_b->push_back(&lb[ib[y++]]);
    } else {
      if (la[ia[x]].outcome.verdict == Verdict::Unknown) shared_unknown->push_back(&la[ia[x]]);
      ++x, ++y;
    }
  }
}

std::string dnat_text(const SymOutcome& o, IPFamily f) {
  if (!o.dnat) return "";
  return trace::host_port(addr_from_value(o.dnat_addr, f), o.dnat_port);
}

std::vector<OutcomeShare> shares(const Dist& d, uint32_t arriving_mark, IPFamily f) {
  std::vector<OutcomeShare> out;
  for (const auto& [no, p] : d) {
    const SymOutcome& o = no.o;
    OutcomeShare s;
    s.verdict = o.verdict;
    s.route = o.route;
    s.dnat = dnat_text(o, f);
    s.masquerade = o.masquerade;
    s.snat = o.snat;
    s.mark = (o.mark_value & o.mark_const) | ((arriving_mark ^ o.mark_flip) & ~o.mark_const);
    s.options = o.options;
    if (o.connmark) {  // as the tracer prints it (trace::connmark_effect_text)
      uint32_t known = o.ct_const | o.ct_from_mark;
      uint32_t v = (o.ct_value & o.ct_const) | ((arriving_mark ^ o.ct_flip) & o.ct_from_mark) | (o.ct_flip & ~known);
      trace::append_effect(&s.options, trace::connmark_effect_text(v, known));
    }
    s.affinity = o.affinity;
    s.unknown = o.unknown;
    s.probability = p;
    out.push_back(std::move(s));
  }
  return out;
}

bool same_decided(std::vector<OutcomeShare> a, std::vector<OutcomeShare> b) {
  auto key = [](const OutcomeShare& s) {
    return std::make_tuple(static_cast<int>(s.verdict), s.route, s.dnat, s.masquerade, s.snat, s.mark, s.options,
                           s.affinity);
  };
  auto by = [&](const OutcomeShare& x, const OutcomeShare& y) { return key(x) < key(y); };
  std::sort(a.begin(), a.end(), by);
  std::sort(b.begin(), b.end(), by);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (key(a[i]) != key(b[i]) || !(a[i].probability == b[i].probability)) return false;
  return true;
}

std::string witness_text(const trace::Packet& p, Origin o, const Universe& u, uint32_t client) {
  std::string s = trace::proto_name(p.proto);
  if (s == "?") s = "proto " + std::to_string(p.proto);
  bool v6 = p.src.family == IPFamily::V6;
  s += " " + (v6 ? "[" + p.src.str() + "]" : p.src.str()) + ":" + std::to_string(p.sport.value_or(0));
  s += " -> " + trace::host_port(p.dst, p.dport);
  s += o == Origin::Node ? ", from the node" : ", arriving";
  if (o == Origin::Arriving && p.in_iface) s += " on " + *p.in_iface;
  // Bridge ports only when the rules test them (the universe has port atoms).
  if (o == Origin::Arriving && u.bridge_ports.size() > 2 && p.in_bridge_port) {
    if (p.in_bridge_port->empty())
      s += ", not through a bridge port";
    else
      s += ", bridge port " + *p.in_bridge_port +
           (p.out_bridge_port && !p.out_bridge_port->empty() ? " bridged to " + *p.out_bridge_port : " (routed)");
  }
  s += ", ct " + ir::ctstate_text(p.ctstate);
  char b[32];
  std::snprintf(b, sizeof b, ", mark 0x%x", p.mark);
  s += b;
  s += client == 0 ? ", new client" : ", client remembered for " + u.affinity_keys[client];
  if (client != 0 && !u.age_cuts.empty()) s += " (last seen " + std::to_string(p.remembered_age) + " s ago)";
  return s;
}

}  // namespace

PacketClass point_class(const trace::Packet& p, const Universe& u, uint32_t client) {
  PacketClass c = PacketClass::everything(u);
  u128 s = addr_value(p.src), d = addr_value(p.dst);
  c.src = AddrSet::point(s);
  c.dst = AddrSet::point(d);
  c.proto = ProtoSet::of(p.proto);
  if (p.sport) c.sport = PortSet::point(*p.sport);
  c.dport = PortSet::point(p.dport);
  c.mark_known = ~0u;
  c.mark_value = p.mark;
  c.ct = SmallSet{};
  for (unsigned i = 0; i < kCtCombos; ++i)
    if (ct_combo_bits(i) == p.ctstate) c.ct = SmallSet::of(i);
  auto atom = [&](const std::optional<std::string>& n, SmallSet& set) {
    if (!n) return;
    for (unsigned i = 0; i < u.ifaces.size(); ++i)
      if (u.ifaces[i] == *n) set = SmallSet::of(i);
  };
  atom(p.in_iface, c.in_iface);
  atom(p.out_iface, c.out_iface);
  auto port = [&](const std::optional<std::string>& n, SmallSet& set) {
    if (!n) return;
    for (unsigned i = 0; i < u.bridge_ports.size(); ++i)
      if (u.bridge_ports[i] == *n) set = SmallSet::of(i);
  };
  port(p.in_bridge_port, c.bridge_in);
  port(p.out_bridge_port, c.bridge_out);
  c.client = ClientSet::only(client);
  c.age = SmallSet::of(u.age_bucket_of(p.remembered_age));
  return c;
}

std::vector<OutcomeShare> distribution_at(const std::vector<Leaf>& leaves, const PacketClass& point, uint32_t mark,
                                          const Universe& u) {
  Dist d;
  for (const Leaf& l : leaves)
    if (l.cls.overlaps(point, u)) add_to(d, NormOutcome{normalize(l.outcome, point)}, l.prob);
  return shares(d, mark, u.family);
}

bool same_outcomes(const std::vector<OutcomeShare>& a, const std::vector<OutcomeShare>& b) {
  return same_decided(a, b);
}

std::string format_probability(const Probability& p) {
  if (p.is_one()) return "1";
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", p.to_double() * 100);
  return std::string(pct) + " (" + p.fraction() + ")";
}

std::string format_share(const OutcomeShare& s) { return "p=" + format_probability(s.probability) + " " + format_outcome(s); }

std::string format_outcome(const OutcomeShare& s) {
  std::string out = trace::verdict_name(s.verdict);
  if (!s.route.empty()) out += "(" + s.route + ")";
  if (!s.dnat.empty()) out += " DNAT " + s.dnat;
  if (s.masquerade) out += " masquerade";
  if (!s.snat.empty()) out += " SNAT " + s.snat;
  char b[32];
  std::snprintf(b, sizeof b, " mark 0x%x", s.mark);
  out += b;
  if (!s.options.empty()) out += " [" + s.options + "]";
  if (!s.affinity.empty()) out += " affinity: " + s.affinity;
  if (!s.unknown.empty()) out += " [" + s.unknown + "]";
  return out;
}

bool same_shares(const std::vector<OutcomeShare>& a, const std::vector<OutcomeShare>& b) { return same_decided(a, b); }

CompareResult compare_sides(const Universe& u, CompareSide& ea, CompareSide& eb, AffectedAtoms aff,
                            const CompareOptions& opt) {
  CompareResult res;
  res.atoms = u.atom_count();
  size_t n = 0;
  for (char c : aff.atom) n += c != 0;
  res.narrowing = aff.all ? "all atoms: " + aff.why_all
                          : std::to_string(n) + " of " + std::to_string(u.atom_count()) +
                                " destination atoms reach a differing rule";
  if (opt.max_atoms && n > opt.max_atoms) {
    // An evenly spread sample (deterministic): every k-th affected atom.
    size_t k = 0, step = (n + opt.max_atoms - 1) / opt.max_atoms, kept = 0;
    for (auto& c : aff.atom)
      if (c) c = (k++ % step == 0 && kept < opt.max_atoms) ? (++kept, 1) : 0;
    res.sampled = true;
    res.narrowing += "; " + std::to_string(kept) + " of them explored (a sample: --max-atoms)";
    n = kept;
  }
  res.atoms_explored = n;

  size_t traced_total = 0;
  std::set<std::string> service_keys;
  for (size_t ai = 0; ai < u.atom_count(); ++ai) {
    if (!aff.atom[ai]) continue;
    for (Origin origin : {Origin::Arriving, Origin::Node}) {
      size_t traced_here = 0;
      PacketClass start = PacketClass::everything(u);
      auto [lo, hi] = u.atom(ai);
      start.dst = AddrSet::range(lo, hi);
      auto la = ea.explore(start, origin);
      auto lb = eb.explore(start, origin);
      res.leaves += la.size() + lb.size();
      ++res.classes_compared;
      std::vector<const Leaf*> only_a, only_b, shared_unknown;
      unmatched(la, lb, &only_a, &only_b, &shared_unknown);
      if (only_a.empty() && only_b.empty() && shared_unknown.empty()) continue;
      // Candidate classes: where the unmatched leaves' sums differ, one outcome at a time.
      // Grouping by outcome keeps each refinement to the few leaves of one outcome (a
      // statistic cascade gives each endpoint its own DNAT outcome), so a change early in
      // a 1,000-endpoint cascade costs ~1,000 small refinements, not one quadratic one.
      // A packet differs iff some outcome's probability differs at it, so the union of
      // the groups' regions is exactly the differing set; later regions are cut by the
      // earlier ones, keeping the reported classes disjoint. Unknown leaves group by reason.
      std::map<std::string, std::pair<std::vector<const Leaf*>, std::vector<const Leaf*>>> by_outcome;
      for (int side = 0; side < 2; ++side)
        for (const Leaf* l : side ? only_b : only_a) {
          SymOutcome n = normalize(l->outcome, l->cls);
          n.mark_const = n.mark_value = n.mark_flip = 0;  // marks: compared per region below
          if (n.connmark) n.options += "|connmark " + std::to_string(n.ct_const) + "/" + std::to_string(n.ct_value) + "/" +
                                       std::to_string(n.ct_flip) + "/" + std::to_string(n.ct_from_mark);
          std::string k = std::to_string(static_cast<int>(n.verdict)) + "|" + n.route + "|" +
                          (n.dnat ? dnat_text(n, u.family) : "") + "|" + (n.masquerade ? "m" : "") + "|" + n.snat +
                          "|" + n.options + "|" + n.affinity + "|" + n.unknown;
          (side ? by_outcome[k].second : by_outcome[k].first).push_back(l);
        }
      std::vector<PacketClass> candidates;
      PortBuckets candidate_ports;  // the earlier candidates a region may meet
      std::vector<uint32_t> earlier;
      for (const auto& [key, group] : by_outcome) {
        for (const Region& r : refine(start, group.first, group.second, u)) {
          bool ua = has_unknown(r.only_a), ub = has_unknown(r.only_b);
          if (!ua && !ub && normalized(r.only_a, r.cls) == normalized(r.only_b, r.cls)) continue;
          std::vector<PacketClass> pieces{r.cls};
          auto cut = [&](const PacketClass& c) {
            // Most candidates meet no piece: nothing is copied then.
            if (std::none_of(pieces.begin(), pieces.end(), [&](const PacketClass& pc) { return pc.overlaps(c, u); }))
              return;
            std::vector<PacketClass> rest;
            for (PacketClass& pc : pieces) {
              if (!pc.overlaps(c, u)) {
                rest.push_back(std::move(pc));
                continue;
              }
              for (auto& x : pc.subtract(c, u)) rest.push_back(std::move(x));
            }
            pieces = std::move(rest);
          };
          // In the candidates' order, as cutting by every one would (a candidate that does
          // not meet the region leaves its pieces as they are).
          const bool by_port = candidate_ports.collect(r.cls.dport, &earlier);  // else every candidate
          const size_t n = by_port ? earlier.size() : candidates.size();
          for (size_t j = 0; j < n && !pieces.empty(); ++j) cut(candidates[by_port ? earlier[j] : j]);
          for (auto& pc : pieces) {
            candidate_ports.add(static_cast<uint32_t>(candidates.size()), pc.dport);
            candidates.push_back(std::move(pc));
          }
        }
      }
      for (const Leaf* l : shared_unknown) candidates.push_back(l->cls);
      const SideLeaves sa(la), sb(lb);
      for (const PacketClass& c : candidates) {
          // Undecided if an Unknown outcome (either side, shared or not) reaches into the class.
          bool undecided = sa.unknown_meets(c, u) || sb.unknown_meets(c, u);
          Witness w = pick_witness(c, u);
          PacketClass pt = witness_class(w, u);
          Dist da = full_dist(sa, pt, u), db = full_dist(sb, pt, u);
          if (!undecided && da == db) {
            // The outcomes differ as functions of the arriving mark (MARK --and-mark 0x1
            // vs 0x2 agree on mark 0): each final mark bit is constant or the arriving
            // bit (flipped), so flipping one free bit at a time finds an arriving mark
            // where they differ, if the whole free mask does not.
            uint32_t free = ~c.mark_known;
            std::vector<uint32_t> tries = {w.mark | free};
            for (unsigned b = 0; b < 32; ++b)
              if (free & (1u << b)) tries.push_back(w.mark ^ (1u << b));
            for (uint32_t m : tries) {
              Witness w2 = w;
              w2.mark = m;
              PacketClass p2 = witness_class(w2, u);
              Dist a2 = full_dist(sa, p2, u), b2 = full_dist(sb, p2, u);
              if (a2 == b2) continue;
              w = w2, pt = p2, da = std::move(a2), db = std::move(b2);
              break;
            }
            // Still none: the classes differ but no witness was found. Never dropped:
            // reported as undecided rather than silently equal.
            if (da == db) undecided = true;
          }
          // Predicates (tests the model cannot evaluate, as class bits): the witness's
          // outcomes may depend on some. Decided only if the two sides differ whatever
          // those tests say; if they differ for some values only, "may differ".
          uint64_t dep = pred_deps(sa, sb, pt, u);
          if (dep && !undecided) {
            if (__builtin_popcountll(dep) > 10) {
              undecided = true;
            } else {
              bool all = true;
              std::optional<uint64_t> shown;
              uint64_t v = 0;
              do {
                PacketClass pv = pt;
                pv.pred_value = (pt.pred_value & ~dep) | v;
                Dist a2 = full_dist(sa, pv, u), b2 = full_dist(sb, pv, u);
                if (a2 == b2) {
                  all = false;
                } else if (!shown || pv.pred_value == pt.pred_value) {
                  shown = pv.pred_value;
                  da = std::move(a2), db = std::move(b2);
                }
                v = (v - dep) & dep;  // next subset of dep
              } while (v != 0);
              if (!all) undecided = true;
              if (shown) pt.pred_value = w.preds = *shown;
            }
          }
          (undecided ? res.undecided_classes : res.differing_classes)++;
          // Attribution from this class's own leaves on each side: the services named
          // on the paths that hold the witness, as the concrete tracer names them. For
          // every class, listed or not, so that the report counts every service.
          std::vector<std::string> services, side_services[2];
          for (int side = 0; side < 2; ++side)
            (side ? sb : sa).for_each_meeting(pt, u, [&](const Leaf& l) {
              for (uint32_t sv : l.services) {
                if (std::find(services.begin(), services.end(), u.services[sv]) == services.end())
                  services.push_back(u.services[sv]);
                auto& mine = side_services[side];
                if (std::find(mine.begin(), mine.end(), u.services[sv]) == mine.end()) mine.push_back(u.services[sv]);
              }
            });
          service_keys.insert(services.empty() ? std::string() : services[0]);
          if (res.differences.size() >= opt.max_reported) continue;
          Difference d;
          d.services = std::move(services);
          d.origin = origin;
          d.undecided = undecided;
          d.cls = describe(c, u);
          d.witness_a = ea.concrete(w, origin);
          d.witness_b = eb.concrete(w, origin);
          d.witness_text = witness_text(d.witness_a, origin, u, w.client);
          d.before = shares(da, w.mark, u.family);
          d.after = shares(db, w.mark, u.family);
          for (unsigned b = 0; b < 64; ++b)
            if (dep & (uint64_t(1) << b))
              d.assumptions.push_back("[" + u.preds[b] + "] " +
                                      (pt.pred_value & (uint64_t(1) << b) ? "holds" : "does not hold"));
          if (traced_here >= opt.traced_per_start || traced_total >= opt.traced_total) {
            res.differences.push_back(std::move(d));
            continue;
          }
          ++traced_here;
          ++traced_total;
          d.traced = true;
          std::vector<std::string> named_a, named_b;
          auto sha = ea.trace(d.witness_a, &named_a, &d.path_before);
          auto shb = eb.trace(d.witness_b, &named_b, &d.path_after);
          // The concrete tracer cannot evaluate predicates: no self-check across them.
          if (dep) {
            res.differences.push_back(std::move(d));
            continue;
          }
          if (!undecided) {
            if (!same_decided(d.before, sha))
              res.self_check_failures.push_back("before: symbolic and concrete outcomes disagree for " + d.witness_text);
            if (!same_decided(d.after, shb))
              res.self_check_failures.push_back("after: symbolic and concrete outcomes disagree for " + d.witness_text);
          }
          // Each side's tracer must name exactly the services that side's leaves name (the class
          // is filed under both sides' services).
          auto sorted = [](std::vector<std::string> v) {
            std::sort(v.begin(), v.end());
            return v;
          };
          auto list = [](const std::vector<std::string>& v) {
            std::string t;
            for (const auto& x : v) t += (t.empty() ? "" : ", ") + (x.empty() ? std::string("\"\"") : x);
            return t.empty() ? std::string("none") : t;
          };
          for (int side = 0; side < 2; ++side) {
            auto sym = sorted(side_services[side]), con = sorted(side ? named_b : named_a);
            if (sym != con)
              res.self_check_failures.push_back(std::string(side ? "after" : "before") +
                                                ": the symbolic paths and the concrete tracer name different "
                                                "services for " + d.witness_text + " (symbolic: " + list(sym) +
                                                "; concrete: " + list(con) + ")");
          }
          res.differences.push_back(std::move(d));
        }
    }
  }
  std::stable_sort(res.differences.begin(), res.differences.end(),
                   [](const Difference& a, const Difference& b) { return a.undecided < b.undecided; });
  res.services_differing.assign(service_keys.begin(), service_keys.end());
  return res;
}

}  // namespace kpc::verifier::sem
