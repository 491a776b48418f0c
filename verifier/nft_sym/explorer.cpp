#include "verifier/nft_sym/explorer.h"

#include "compiler/support/side_by_side.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "compiler/ir/rule.h"
#include "compiler/support/side_by_side.h"
#include "verifier/nft_trace/rule_model.h"
#include "verifier/nft_trace/tracer.h"

namespace kpc::verifier::nft_sym {

using nft_trace::Field;
using nft_trace::Key;
using nft_trace::Range;
using nft_trace::RuleModel;
using nft_trace::Stmt;
using nft_trace::VerdictKind;
using nft_trace::VerdictSpec;
using sem::AddrSet;
using sem::ClientSet;
using sem::Leaf;
using sem::Origin;
using sem::PacketClass;
using sem::PortSet;
using sem::ProtoSet;
using sem::SmallSet;
using sem::u128;
using sem::Universe;
using sem::SymOutcome;
using trace::Probability;
using trace::Verdict;

namespace {

enum class Hook : uint8_t { Prerouting, Input, Forward, Output, Postrouting };
const char* hook_name(Hook h) {
  switch (h) {
    case Hook::Prerouting: return "prerouting";
    case Hook::Input: return "input";
    case Hook::Forward: return "forward";
    case Hook::Output: return "output";
    case Hook::Postrouting: return "postrouting";
  }
  return "?";
}
enum class Manip : uint8_t { Dst, Src, None };
Manip manip_of(Hook h) {
  if (h == Hook::Prerouting || h == Hook::Output) return Manip::Dst;
  if (h == Hook::Input || h == Hook::Postrouting) return Manip::Src;
  return Manip::None;
}

constexpr int kConntrackPriority = -200;  // NF_IP_PRI_CONNTRACK
constexpr size_t kMaxRulesPerPath = 100000;
constexpr size_t kMaxDepth = 64;  // as the tracer's default

bool family_sees(nft::Family f, IPFamily pkt) {
  return f == nft::Family::Inet || (pkt == IPFamily::V4 ? f == nft::Family::Ip : f == nft::Family::Ip6);
}

struct Stage {
  bool route = false;
  Hook hook = Hook::Prerouting;
  const nft::Table* table = nullptr;
  const nft::Chain* chain = nullptr;
  bool loopback = false;
};

struct Frame {
  const nft::Chain* chain = nullptr;
  size_t next = 0;
};

bool iface_in(const Range& r, const std::string& name) {
  return r.wildcard ? name.compare(0, r.lo.str.size(), r.lo.str) == 0 : name == r.lo.str;
}

// The interface names of a rule model's matches (for the universe's atoms).
void iface_names(const RuleModel& m, std::set<std::string>* out) {
  for (const auto& s : m.stmts)
    for (size_t i = 0; i < s.key.fields.size(); ++i) {
      Field f = s.key.fields[i];
      if (f != Field::Iifname && f != Field::Oifname && f != Field::Iif && f != Field::Oif) continue;
      for (const auto& el : s.elements)
        if (i < el.key.size()) out->insert(el.key[i].wildcard ? el.key[i].lo.str + "*" : el.key[i].lo.str);
    }
}

}  // namespace

std::string affinity_key(const std::string& set) { return "nft set " + set; }

// ------------------------------------------------------------------ universe

namespace {

// One state's contribution to a universe: destination cut points, interface names, affinity
// timeouts. A function of the state alone, so that two states' are collected side by side.
struct Cuts {
  std::set<u128> cuts;
  std::set<std::string> names;
  std::set<uint32_t> seconds;
};

// Can this rule text give a cut, an interface name or a named lookup? Only through the words
// the rule model reads them from: `ip`/`ip6`/`fib daddr`, `iifname`/`oifname`/`iif`/`oif`,
// `dnat`, or an `@set` of a lookup (an '@' right after "update " or "add " is a set update,
// which gives none). The others (a 10,000-Service table's masquerade marks, numgen maps,
// jumps, affinity updates: about half its rules) are not parsed.
bool may_contribute(std::string_view t) {
  constexpr auto npos = std::string_view::npos;
  if (t.find("daddr") != npos || t.find("dnat") != npos || t.find("iif") != npos || t.find("oif") != npos) return true;
  auto ends = [](std::string_view s, std::string_view w) { return s.size() >= w.size() && s.substr(s.size() - w.size()) == w; };
  for (size_t p = t.find('@'); p != npos; p = t.find('@', p + 1))
    if (!ends(t.substr(0, p), "update ") && !ends(t.substr(0, p), "add ")) return true;
  return false;
}

void collect_cuts(const nft::NftState& state, IPFamily family, u128 addr_max, Cuts* out) {
  const bool v4 = family == IPFamily::V4;
  std::set<u128>& cuts = out->cuts;
  std::set<std::string>& names = out->names;
  std::set<uint32_t>& seconds = out->seconds;
  auto cut = [&](const IPAddr& lo, const IPAddr& hi) {
    if (lo.family != family) return;
    u128 a = sem::addr_value(lo), b = sem::addr_value(hi);
    cuts.insert(a);
    if (b < addr_max) cuts.insert(b + 1);
  };
  {
    for (const auto& tb : state.tables) {
      if (!family_sees(tb.family, family)) continue;
      // Sets by the fields the rules look them up with.
      std::map<std::string, std::vector<Field>> set_fields;
      for (const auto& c : tb.chains)
        for (const auto& r : c.rules) {
          if (!may_contribute(r.canonical())) continue;
          RuleModel m = nft_trace::read_rule(r.canonical(), v4);
          iface_names(m, &names);
          for (const auto& s : m.stmts) {
            for (size_t i = 0; i < s.key.fields.size(); ++i) {
              if (s.key.fields[i] != Field::IpDaddr && s.key.fields[i] != Field::FibDaddrType) continue;
              for (const auto& el : s.elements)
                if (i < el.key.size()) cut(el.key[i].lo.addr, el.key[i].hi.addr);
            }
            if ((s.kind == Stmt::Match || s.kind == Stmt::Vmap) && !s.anonymous && !s.set.empty())
              set_fields[s.set] = s.key.fields;
            if (s.kind == Stmt::Dnat && s.nat_addr) cut(*s.nat_addr, *s.nat_addr);
          }
        }
      for (const auto& set : tb.sets) {
        if (set.timeout_ms && set.timeout_ms % 1000 == 0) seconds.insert(static_cast<uint32_t>(set.timeout_ms / 1000));
        auto it = set_fields.find(set.name);
        if (it == set_fields.end()) continue;
        const auto& fields = it->second;
        for (const auto& el : set.elements) {
          if (el.removed) continue;
          for (size_t i = 0; i < fields.size() && i < el.key.size(); ++i) {
            Range r;
            if (fields[i] == Field::IpDaddr && nft_trace::read_range(fields[i], el.key[i], v4, &r))
              cut(r.lo.addr, r.hi.addr);
            if ((fields[i] == Field::Iifname || fields[i] == Field::Oifname) &&
                nft_trace::read_range(fields[i], el.key[i], v4, &r))
              names.insert(r.wildcard ? r.lo.str + "*" : r.lo.str);
          }
        }
      }
    }
  }
}

}  // namespace

void add_to_universe(Universe& u, const std::vector<const nft::NftState*>& states) {
  std::vector<Cuts> per(states.size());
  // Two states (a comparison's): collected on two threads.
  if (states.size() == 2 && states[0] != states[1])
    side_by_side([&] { collect_cuts(*states[1], u.family, u.addr_max, &per[1]); },
                 [&] { collect_cuts(*states[0], u.family, u.addr_max, &per[0]); });
  else
    for (size_t i = 0; i < states.size(); ++i) collect_cuts(*states[i], u.family, u.addr_max, &per[i]);
  std::set<u128> cuts(u.dst_cuts.begin(), u.dst_cuts.end());
  cuts.insert(0);
  std::set<std::string> names;
  std::set<uint32_t> seconds(u.age_cuts.begin(), u.age_cuts.end());
  for (auto& c : per) {
    cuts.merge(c.cuts);
    names.merge(c.names);
    seconds.merge(c.seconds);
  }
  u.dst_cuts.assign(cuts.begin(), cuts.end());
  u.age_cuts.clear();
  for (uint32_t s : seconds)
    if (u.age_cuts.size() < 63) u.age_cuts.push_back(s);
  std::set<std::string> reps(u.ifaces.begin(), u.ifaces.end());
  for (const auto& n : names) {
    if (n.empty() || n == "*" || n == "lo") continue;
    reps.insert(n.back() == '*' ? n.substr(0, n.size() - 1) + "kpc0" : n);
  }
  reps.insert("kpc-other0");
  u.ifaces.assign(reps.begin(), reps.end());
  if (u.ifaces.size() > 63) u.ifaces.resize(63);
}

Universe build_universe(const std::vector<const nft::NftState*>& states, IPFamily family,
                        const std::vector<IPAddr>& local_addresses) {
  Universe u = sem::node_universe(family, local_addresses);
  add_to_universe(u, states);
  return u;
}

// ------------------------------------------------------------------ the explorer

struct Explorer::Impl {
  const nft::NftState& st;
  Universe& u;
  bool v4;
  std::unordered_map<const nft::Rule*, RuleModel> models;
  std::unordered_map<std::string, uint32_t> set_ids;            // affinity set -> client id
  std::map<uint32_t, std::vector<std::string>> sets_of;
  std::unordered_map<const nft::Table*, std::set<std::string>> dynsets;
  // Parsed elements of a named set for a key's fields (nullopt: not readable).
  struct Parsed {
    std::vector<std::optional<std::vector<Range>>> els;
    int daddr = -1;  // key position of ip daddr (for the atom index), -1 none
    std::vector<uint32_t> generic;                                  // elements every class scans
    std::unordered_map<uint32_t, std::vector<uint32_t>> by_atom;    // atom -> elements holding it
  };
  std::map<std::pair<const nft::Set*, std::string>, Parsed> parsed;
  std::vector<Leaf> leaves;

  struct Exec {
    PacketClass k;
    Origin origin = Origin::Arriving;
    bool dst_set = false;  // destination rewritten (dnat): dst/dport concrete
    u128 dst = 0;
    uint16_t dport = 0;
    bool src_masq = false;
    bool snat_bound_src = false;
    std::optional<IPAddr> snat_src;
    uint32_t mc = 0, mv = 0, mf = 0;  // mark function (as SymOutcome)
    uint32_t ct_extra = 0;            // kCtDnat / kCtSnat made on this path
    bool dnat = false, masq = false;
    std::string snat, options;
    std::vector<std::string> affinity;
    std::set<std::pair<std::string, std::string>> updated;
    std::vector<uint32_t> services;
    Probability prob;
    std::vector<Stage> plan;
    size_t stage = 0;
    std::vector<Frame> stack;
    std::string route;
    bool bound_dst = false, bound_src = false;
    std::optional<Hook> last_hook;
    const nft::Rule* rule = nullptr;
    const RuleModel* model = nullptr;
    size_t stmt = 0;
    bool recorded = false;
    std::optional<uint32_t> numgen;
    size_t evaluated = 0;
  };
  std::vector<Exec> work;
  // Every live base chain, in table and chain order: the walks look for hooks here rather
  // than over every chain of the state (a 10,000-Service table has ~110,000 chains).
  std::vector<std::pair<const nft::Table*, const nft::Chain*>> base_chains;

  Impl(const nft::NftState& s, Universe& uni) : st(s), u(uni), v4(uni.family == IPFamily::V4) {
    for (const auto& tb : st.tables)
      for (const auto& c : tb.chains)
        if (c.base && !c.removed) base_chains.push_back({&tb, &c});
    // Affinity sets: those a rule updates. Ids are interned by canonical key.
    for (const auto& tb : st.tables) {
      if (!family_sees(tb.family, u.family)) continue;
      for (const auto& n : dynamic_sets(tb)) {
        uint32_t id = u.affinity_id(affinity_key(n));
        set_ids[n] = id;
        sets_of[id].push_back(n);
      }
    }
  }

  const std::set<std::string>& dynamic_sets(const nft::Table& tb) {
    auto it = dynsets.find(&tb);
    if (it != dynsets.end()) return it->second;
    std::set<std::string> names;
    for (const auto& c : tb.chains)
      for (const auto& r : c.rules)
        for (const auto& n : r.refs().dynset) names.insert(n);
    for (const auto& s : tb.sets)
      if (s.has_flag("dynamic")) names.insert(s.name);
    return dynsets.emplace(&tb, std::move(names)).first->second;
  }

  const RuleModel& model(const nft::Rule& r) {
    auto it = models.find(&r);
    if (it == models.end()) it = models.emplace(&r, nft_trace::read_rule(r.canonical(), v4)).first;
    return it->second;
  }

  // ---------------------------------------------------------------- plan

  std::vector<Stage> hook_stages(Hook h, bool loopback) const {
    std::vector<Stage> out;
    for (const auto& [tb, c] : base_chains) {
      if (!family_sees(tb->family, u.family) || c->hook != hook_name(h)) continue;
      out.push_back(Stage{false, h, tb, c, loopback});
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const Stage& a, const Stage& b) { return a.chain->priority < b.chain->priority; });
    return out;
  }
  void append(Exec& e, Hook h, bool loopback = false) {
    auto s = hook_stages(h, loopback);
    e.plan.insert(e.plan.end(), s.begin(), s.end());
  }
  u128 cur_dst(const Exec& e) const { return e.dst_set ? e.dst : e.k.dst.first(); }
  bool dst_local(const Exec& e) const { return u.local.contains(cur_dst(e)); }

  void route(Exec& e) {
    bool local = dst_local(e);
    if (e.origin == Origin::Node) {
      e.route = local ? "local" : "output";
      if (local) {
        append(e, Hook::Prerouting, true);
        append(e, Hook::Input, true);
      }
      return;
    }
    if (local) {
      e.route = "local";
      append(e, Hook::Input);
    } else {
      e.route = "forward";
      append(e, Hook::Forward);
      append(e, Hook::Postrouting);
    }
  }

  // ---------------------------------------------------------------- outcomes

  void add_service(Exec& e, const std::string& name) {
    if (name.empty()) return;
    uint32_t id = u.service_id(name);
    if (std::find(e.services.begin(), e.services.end(), id) == e.services.end()) e.services.push_back(id);
  }
  // The rule is on the path (the tracer's record_step): its chain and comment name services.
  void record(Exec& e) {
    if (e.recorded || !e.rule) return;
    e.recorded = true;
    if (!e.stack.empty()) add_service(e, nft_trace::service_from_chain(e.stack.back().chain->name));
    if (e.model) add_service(e, trace::service_from_comment(e.model->comment));
  }

  void finish(Exec& e, Verdict v, std::string why = {}) {
    if (e.prob.is_zero() || e.k.empty(u)) return;
    Leaf l;
    l.cls = std::move(e.k);
    l.prob = e.prob;
    SymOutcome& o = l.outcome;
    o.verdict = v;
    if (v == Verdict::Accept) o.route = e.route;
    o.dnat = e.dnat;
    if (e.dnat) {
      o.dnat_addr = e.dst;
      o.dnat_port = e.dport;
    }
    o.masquerade = e.masq;
    o.snat = e.snat;
    o.mark_const = e.mc;
    o.mark_value = e.mv & e.mc;
    o.mark_flip = e.mf & ~e.mc;
    o.options = e.options;
    for (const auto& a : e.affinity) trace::append_effect(&o.affinity, a);
    o.unknown = std::move(why);
    l.services = e.services;
    leaves.push_back(std::move(l));
  }
  void unknown(Exec& e, std::string why) {
    if (e.rule) {
      e.recorded = false;
      record(e);
    }
    finish(e, Verdict::Unknown, std::move(why));
  }

  // ---------------------------------------------------------------- splitting

  // Parts of a class after one test: pass, fail, the rule breaks (a field is absent), unknown.
  struct Split {
    std::vector<PacketClass> yes, no, broken;
    std::vector<std::pair<PacketClass, std::string>> unknown;
  };

  std::optional<std::string> in_iface(const Exec& e) const {
    const Stage& s = e.plan[e.stage];
    if (s.hook == Hook::Output || s.hook == Hook::Postrouting) return std::string();
    if (s.loopback) return std::string("lo");
    return std::nullopt;
  }
  std::optional<std::string> out_iface(const Exec& e) const {
    const Stage& s = e.plan[e.stage];
    if (s.hook == Hook::Prerouting || s.hook == Hook::Input) return std::string();
    if (e.origin == Origin::Node && dst_local(e)) return std::string("lo");
    return std::nullopt;
  }

  // Before conntrack (prerouting/output below -200): ct state reads invalid, ct status is absent.
  enum class CtView : uint8_t { Entry, None, Ambiguous };
  CtView ct_view(const Exec& e) const {
    const Stage& s = e.plan[e.stage];
    if ((s.hook == Hook::Prerouting && !s.loopback) || s.hook == Hook::Output) {
      if (s.chain->priority == kConntrackPriority) return CtView::Ambiguous;
      if (s.chain->priority < kConntrackPriority) return CtView::None;
    }
    return CtView::Entry;
  }

  void two(PacketClass&& y, PacketClass&& n, std::vector<PacketClass>& yes, std::vector<PacketClass>& no) {
    if (!y.empty(u)) yes.push_back(std::move(y));
    if (!n.empty(u)) no.push_back(std::move(n));
  }
  void by(const PacketClass& k, const PacketClass& need, std::vector<PacketClass>& yes, std::vector<PacketClass>& no) {
    PacketClass y = k.intersect(need);
    if (!y.empty(u)) yes.push_back(std::move(y));
    for (auto& x : k.subtract(need, u)) no.push_back(std::move(x));
  }

  // Splits k by "field f of the packet is in r" (one field of an element).
  void split_field(const Exec& e, const Key& key, Field f, const Range& r, const PacketClass& k,
                   std::vector<PacketClass>& yes, std::vector<PacketClass>& no,
                   std::vector<std::pair<PacketClass, std::string>>& unk) {
    auto decide = [&](bool m) { (m ? yes : no).push_back(k); };
    auto addr_range = [&](const Range& x) -> std::optional<std::pair<u128, u128>> {
      if (x.lo.addr.family != u.family || x.hi.addr.family != u.family) return std::nullopt;
      return std::make_pair(sem::addr_value(x.lo.addr), sem::addr_value(x.hi.addr));
    };
    switch (f) {
      case Field::IpSaddr: {
        if (e.src_masq) return unk.push_back({k, "the source address after masquerade is the interface's"});
        if (e.snat_src) {
          return decide(e.snat_src->family == r.lo.addr.family && r.lo.addr <= *e.snat_src && *e.snat_src <= r.hi.addr);
        }
        auto ar = addr_range(r);
        if (!ar) return decide(false);
        PacketClass y = k, n = k;
        y.src = k.src.intersect(ar->first, ar->second);
        n.src = k.src.subtract(ar->first, ar->second);
        return two(std::move(y), std::move(n), yes, no);
      }
      case Field::IpDaddr: {
        auto ar = addr_range(r);
        if (!ar) return decide(false);
        if (e.dst_set) return decide(ar->first <= e.dst && e.dst <= ar->second);
        PacketClass y = k, n = k;
        y.dst = k.dst.intersect(ar->first, ar->second);
        n.dst = k.dst.subtract(ar->first, ar->second);
        return two(std::move(y), std::move(n), yes, no);
      }
      case Field::L4proto: {
        ProtoSet ps;
        for (uint64_t p = r.lo.num; p <= r.hi.num && p < 256; ++p) ps.w[p / 64] |= 1ull << (p % 64);
        PacketClass y = k, n = k;
        y.proto = k.proto & ps;
        n.proto = k.proto.minus(ps);
        return two(std::move(y), std::move(n), yes, no);
      }
      case Field::ThDport:
      case Field::ThSport: {
        uint32_t lo = static_cast<uint32_t>(r.lo.num), hi = static_cast<uint32_t>(r.hi.num);
        if (f == Field::ThDport && e.dst_set) return decide(lo <= e.dport && e.dport <= hi);
        PacketClass y = k, n = k;
        PortSet& yp = f == Field::ThDport ? y.dport : y.sport;
        PortSet& np = f == Field::ThDport ? n.dport : n.sport;
        yp = (f == Field::ThDport ? k.dport : k.sport).intersect(lo, hi);
        np = (f == Field::ThDport ? k.dport : k.sport).subtract(lo, hi);
        return two(std::move(y), std::move(n), yes, no);
      }
      case Field::Mark: {
        if (r.lo.num != r.hi.num) return unk.push_back({k, "a mark range is not modelled: " + key.text});
        uint32_t m = key.mark_mask ? *key.mark_mask : ~0u;
        uint32_t want = static_cast<uint32_t>(r.lo.num);
        if (want & ~m) return decide(false);
        if (((e.mv ^ want) & m & e.mc) != 0) return decide(false);
        uint32_t free = m & ~e.mc;
        if (!free) return decide(true);
        PacketClass need = PacketClass::everything(u);
        need.mark_known = free;
        need.mark_value = (want ^ e.mf) & free;
        return by(k, need, yes, no);
      }
      case Field::Iifname:
      case Field::Oifname:
      case Field::Iif:
      case Field::Oif: {
        bool in = f == Field::Iifname || f == Field::Iif;
        auto name = in ? in_iface(e) : out_iface(e);
        if (name) return decide(iface_in(r, *name));  // (an absent index was handled by the caller)
        uint64_t atoms = 0;
        for (unsigned i = 0; i < u.ifaces.size(); ++i)
          if (iface_in(r, u.ifaces[i])) atoms |= uint64_t(1) << i;
        PacketClass y = k, n = k;
        (in ? y.in_iface : y.out_iface).bits &= atoms;
        (in ? n.in_iface : n.out_iface).bits &= ~atoms;
        return two(std::move(y), std::move(n), yes, no);
      }
      case Field::FibSaddrType:
      case Field::FibDaddrType: {
        bool is_src = f == Field::FibSaddrType;
        bool want_local = !r.wildcard && r.lo.str == "local";
        if (is_src && (e.src_masq || e.snat_src))
          return unk.push_back({k, "the source address after masquerade is the interface's"});
        AddrSet a = is_src ? k.src : (e.dst_set ? AddrSet::point(e.dst) : k.dst);
        PacketClass loc = k, non = k;
        AddrSet la = a.intersect(u.local), na = a.subtract(u.local);
        if (is_src) loc.src = la, non.src = na;
        else if (!e.dst_set) loc.dst = la, non.dst = na;
        if (!la.empty()) (want_local ? yes : no).push_back(e.dst_set && !is_src ? k : loc);
        if (!na.empty()) {
          PacketClass x = e.dst_set && !is_src ? k : non;
          if (want_local) no.push_back(std::move(x));
          else unk.push_back({std::move(x), "fib type " + r.lo.str + " of an address that is not local is not modelled"});
        }
        return;
      }
      case Field::Numgen:
        if (!e.numgen) return unk.push_back({k, "numgen outside the modelled places"});
        return decide(r.lo.num <= *e.numgen && *e.numgen <= r.hi.num);
      case Field::CtState:
      case Field::CtStatus:
        return unk.push_back({k, "conntrack in a concatenation is not modelled"});
    }
  }

  // Splits k by the element: every field of the key in the element's range.
  void split_element(const Exec& e, const Key& key, const std::vector<Range>& el, const PacketClass& k,
                     std::vector<PacketClass>& yes, std::vector<PacketClass>& no,
                     std::vector<std::pair<PacketClass, std::string>>& unk) {
    if (el.size() != key.fields.size()) return unk.push_back({k, "element width differs from the key"});
    std::vector<PacketClass> cur{k};
    for (size_t i = 0; i < el.size() && !cur.empty(); ++i) {
      std::vector<PacketClass> next;
      for (const auto& c : cur) split_field(e, key, key.fields[i], el[i], c, next, no, unk);
      cur = std::move(next);
    }
    for (auto& c : cur) yes.push_back(std::move(c));
  }

  // Fields that are absent for the whole class break the rule (tracer: Got::Absent), and
  // `tcp dport` implies the protocol.
  void pre_split(const Exec& e, const Key& key, const PacketClass& k, std::vector<PacketClass>& go,
                 std::vector<PacketClass>& broken, std::vector<std::pair<PacketClass, std::string>>& unk) {
    for (Field f : key.fields) {
      if (f == Field::Iif || f == Field::Oif) {
        auto name = f == Field::Iif ? in_iface(e) : out_iface(e);
        if (name && name->empty()) return broken.push_back(k);
      }
      if (f == Field::CtState || f == Field::CtStatus) {
        CtView v = ct_view(e);
        if (v == CtView::Ambiguous) return unk.push_back({k, "a chain at priority -200 runs before or after conntrack"});
        if (v == CtView::None && f == Field::CtStatus) return broken.push_back(k);
      }
      if ((f == Field::IpSaddr || f == Field::FibSaddrType) && e.src_masq)
        return unk.push_back({k, "the source address after masquerade is the interface's"});
      if (f == Field::ThSport || f == Field::ThDport || f == Field::IpSaddr || f == Field::IpDaddr) continue;
    }
    if (key.implied_proto) {
      PacketClass y = k, n = k;
      y.proto = k.proto & ProtoSet::of(*key.implied_proto);
      n.proto = k.proto.minus(ProtoSet::of(*key.implied_proto));
      if (!n.empty(u)) broken.push_back(std::move(n));
      if (!y.empty(u)) go.push_back(std::move(y));
      return;
    }
    go.push_back(k);
  }

  // ct state / ct status: a bit mask against the class's conntrack combinations.
  void split_ct(const Exec& e, Field f, uint32_t mask, const PacketClass& k, std::vector<PacketClass>& yes,
                std::vector<PacketClass>& no) {
    if (ct_view(e) == CtView::None) return ((ir::kCtInvalid & mask) ? yes : no).push_back(k);  // ct state only
    PacketClass y = k, n = k;
    y.ct.bits = n.ct.bits = 0;
    for (unsigned i = 0; i < sem::kCtCombos; ++i) {
      if (!k.ct.has(i)) continue;
      uint32_t bits = sem::ct_combo_bits(i) | e.ct_extra;
      (void)f;
      ((bits & mask) ? y.ct : n.ct).bits |= uint64_t(1) << i;
    }
    two(std::move(y), std::move(n), yes, no);
  }

  Parsed& parsed_set(const nft::Set& s, const Key& key) {
    std::string sig;
    for (Field f : key.fields) sig += static_cast<char>('a' + static_cast<int>(f));
    auto it = parsed.find({&s, sig});
    if (it != parsed.end()) return it->second;
    Parsed p;
    for (size_t i = 0; i < key.fields.size(); ++i)
      if (key.fields[i] == Field::IpDaddr && p.daddr < 0) p.daddr = static_cast<int>(i);
    for (uint32_t idx = 0; idx < s.elements.size(); ++idx) {
      const auto& x = s.elements[idx];
      std::vector<Range> r;
      bool ok = !x.removed && x.key.size() == key.fields.size();
      for (size_t i = 0; ok && i < x.key.size(); ++i) {
        Range one;
        ok = nft_trace::read_range(key.fields[i], x.key[i], v4, &one);
        r.push_back(one);
      }
      if (x.removed) {
        p.els.push_back(std::nullopt);
        continue;
      }
      p.els.push_back(ok ? std::optional(r) : std::nullopt);
      if (ok && p.daddr >= 0 && r[p.daddr].lo.addr.family == u.family) {
        size_t a = u.atom_of(sem::addr_value(r[p.daddr].lo.addr)),
               b = u.atom_of(sem::addr_value(r[p.daddr].hi.addr));
        if (b - a < 8) {
          for (size_t q = a; q <= b; ++q) p.by_atom[static_cast<uint32_t>(q)].push_back(idx);
          continue;
        }
      }
      if (ok && p.daddr >= 0 && r[p.daddr].lo.addr.family != u.family) continue;  // never matches
      p.generic.push_back(idx);
    }
    return parsed.emplace(std::make_pair(&s, sig), std::move(p)).first->second;
  }

  // The elements of a named set a class can meet (in element order); unreadable ones too.
  std::vector<uint32_t> candidates(const Exec& e, Parsed& p) {
    if (p.daddr < 0) {
      std::vector<uint32_t> all(p.els.size());
      for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
      return all;
    }
    uint32_t a = static_cast<uint32_t>(u.atom_of(cur_dst(e)));
    std::vector<uint32_t> out = p.generic;
    if (auto it = p.by_atom.find(a); it != p.by_atom.end()) {
      std::vector<uint32_t> m;
      std::merge(out.begin(), out.end(), it->second.begin(), it->second.end(), std::back_inserter(m));
      out = std::move(m);
    }
    return out;
  }

  // Splits k over a list of elements, first match wins: (part, element index) for the
  // matching parts, and the parts no element holds.
  struct ElemSplit {
    std::vector<std::pair<PacketClass, size_t>> hit;
    std::vector<PacketClass> miss;
    std::vector<std::pair<PacketClass, std::string>> unknown;
  };
  ElemSplit split_elements(const Exec& e, const Key& key, const std::vector<const std::vector<Range>*>& els,
                           const std::vector<size_t>& ids, const PacketClass& k) {
    ElemSplit out;
    std::vector<PacketClass> rest{k};
    for (size_t j = 0; j < els.size() && !rest.empty(); ++j) {
      std::vector<PacketClass> next;
      for (const auto& c : rest) {
        if (!els[j]) {
          out.unknown.push_back({c, "element not modelled"});
          continue;
        }
        std::vector<PacketClass> y;
        split_element(e, key, *els[j], c, y, next, out.unknown);
        for (auto& x : y) out.hit.push_back({std::move(x), ids[j]});
      }
      rest = std::move(next);
    }
    out.miss = std::move(rest);
    return out;
  }

  // ---------------------------------------------------------------- statements

  enum class Flow : uint8_t { NextRule, StageDone, Finished };

  // The current frame ends: back to the caller, or the base chain's policy.
  Flow frame_done(Exec& e) {
    e.stack.pop_back();
    if (!e.stack.empty()) return Flow::NextRule;
    const nft::Chain* b = e.plan[e.stage].chain;
    if (b->policy == "drop") {
      add_service(e, nft_trace::service_from_chain(b->name));
      finish(e, Verdict::Drop);
      return Flow::Finished;
    }
    return Flow::StageDone;
  }

  Flow verdict(Exec& e, const VerdictSpec& v) {
    record(e);
    switch (v.kind) {
      case VerdictKind::None:
      case VerdictKind::Continue: return Flow::NextRule;
      case VerdictKind::Accept: return Flow::StageDone;
      case VerdictKind::Drop: finish(e, Verdict::Drop); return Flow::Finished;
      case VerdictKind::Return: return frame_done(e);
      case VerdictKind::Jump:
      case VerdictKind::Goto: {
        const nft::Chain* c = e.plan[e.stage].table->find_chain(v.chain);
        if (!c || c->removed) return unknown(e, "jump to a missing chain " + v.chain), Flow::Finished;
        if (e.stack.size() >= kMaxDepth) return unknown(e, "jump depth beyond the limit"), Flow::Finished;
        if (c->base) return unknown(e, "jump to a base chain"), Flow::Finished;
        if (v.kind == VerdictKind::Goto) e.stack.back() = Frame{c, 0};
        else e.stack.push_back(Frame{c, 0});
        return Flow::NextRule;
      }
    }
    return Flow::NextRule;
  }

  // Continues e after its current rule (part of a split): to the next rule.
  void next_rule(Exec e) {
    e.model = nullptr;
    e.rule = nullptr;
    work.push_back(std::move(e));
  }
  // Continues e with a new class at the next statement.
  void next_stmt(Exec e) {
    ++e.stmt;
    work.push_back(std::move(e));
  }
  Exec with(const Exec& e, PacketClass k) {
    Exec c = e;
    c.k = std::move(k);
    return c;
  }
  void unknown_parts(const Exec& e, std::vector<std::pair<PacketClass, std::string>>& parts, const Stmt& s) {
    for (auto& [k, why] : parts) {
      Exec c = with(e, std::move(k));
      unknown(c, why + ": " + s.text);
    }
  }

  // Is the class's key in the named set? Static elements, then an affinity set's client.
  void match_named(Exec& e, const Stmt& s, std::vector<PacketClass>& yes, std::vector<PacketClass>& no,
                   std::vector<std::pair<PacketClass, std::string>>& unk, const PacketClass& k) {
    const nft::Table* tb = e.plan[e.stage].table;
    const nft::Set* set = tb->find_set(s.set);
    if (!set) return unk.push_back({k, "set @" + s.set + " does not exist"});
    if (set->key.size() != s.key.fields.size()) return unk.push_back({k, "@" + s.set + ": key width differs"});
    Parsed& p = parsed_set(*set, s.key);
    std::vector<const std::vector<Range>*> els;
    std::vector<size_t> ids;
    for (uint32_t i : candidates(e, p)) {
      els.push_back(p.els[i] ? &*p.els[i] : nullptr);
      ids.push_back(i);
    }
    ElemSplit es = split_elements(e, s.key, els, ids, k);
    for (auto& [c, i] : es.hit) yes.push_back(std::move(c));
    for (auto& x : es.unknown) unk.push_back({std::move(x.first), "@" + s.set + ": " + x.second});
    bool dynamic = dynamic_sets(*tb).count(s.set) > 0;
    for (auto& c : es.miss) {
      if (e.updated.count({s.set, s.key.text})) {
        yes.push_back(std::move(c));
        continue;
      }
      if (!dynamic) {
        no.push_back(std::move(c));
        continue;
      }
      auto id = set_ids.find(s.set);
      if (id == set_ids.end()) {
        no.push_back(std::move(c));
        continue;
      }
      PacketClass need = PacketClass::everything(u);
      need.client = ClientSet::only(id->second);
      if (set->timeout_ms) {
        std::optional<SmallSet> ages;
        if (set->timeout_ms % 1000 == 0) ages = u.ages_below(static_cast<uint32_t>(set->timeout_ms / 1000));
        if (!ages) {
          unk.push_back({std::move(c), "@" + s.set + ": timeout not modelled"});
          continue;
        }
        need.age = *ages;
      }
      by(c, need, yes, no);
    }
  }

  // Runs the current rule's statements from e.stmt for e's class (which may be split).
  void exec_rule(Exec e) {
    const RuleModel& m = *e.model;
    for (; e.stmt < m.stmts.size(); ++e.stmt) {
      const Stmt& s = m.stmts[e.stmt];
      if ((s.kind == Stmt::Match || s.kind == Stmt::Vmap) && s.key.numgen_mod && !e.numgen) {
        fork_numgen(std::move(e), s.key);
        return;
      }
      switch (s.kind) {
        case Stmt::Match:
        case Stmt::SetUpdate:
        case Stmt::Vmap: {
          std::vector<PacketClass> go, broken;
          std::vector<std::pair<PacketClass, std::string>> unk;
          pre_split(e, s.key, e.k, go, broken, unk);
          unknown_parts(e, unk, s);
          for (auto& b : broken) next_rule(with(e, std::move(b)));
          if (go.empty()) return;
          if (s.kind == Stmt::SetUpdate) {
            record(e);
            if (!e.plan[e.stage].table->find_set(s.set)) {
              for (auto& g : go) {
                Exec c = with(e, std::move(g));
                unknown(c, "set @" + s.set + " does not exist");
              }
              return;
            }
            e.affinity.push_back(s.update_verb + " @" + s.set);
            e.updated.insert({s.set, s.key.text});
            for (size_t i = 1; i < go.size(); ++i) next_stmt(with(e, std::move(go[i])));
            e.k = std::move(go[0]);
            continue;
          }
          if (s.kind == Stmt::Vmap) return vmap(e, s, go);
          std::vector<PacketClass> yes, no;
          unk.clear();
          for (const auto& g : go) {
            Field f0 = s.key.fields[0];
            if (f0 == Field::CtState || f0 == Field::CtStatus) {
              split_ct(e, f0, static_cast<uint32_t>(s.elements[0].key[0].lo.num), g, yes, no);
            } else if (s.anonymous) {
              std::vector<const std::vector<Range>*> els;
              std::vector<size_t> ids;
              for (size_t i = 0; i < s.elements.size(); ++i) els.push_back(&s.elements[i].key), ids.push_back(i);
              ElemSplit es = split_elements(e, s.key, els, ids, g);
              for (auto& [c, i] : es.hit) yes.push_back(std::move(c));
              for (auto& c : es.miss) no.push_back(std::move(c));
              for (auto& x : es.unknown) unk.push_back(std::move(x));
            } else {
              match_named(e, s, yes, no, unk, g);
            }
          }
          unknown_parts(e, unk, s);
          auto& pass = s.negate ? no : yes;
          auto& fail = s.negate ? yes : no;
          for (auto& c : fail) next_rule(with(e, std::move(c)));
          if (pass.empty()) return;
          for (size_t i = 1; i < pass.size(); ++i) next_stmt(with(e, std::move(pass[i])));
          e.k = std::move(pass[0]);
          continue;
        }
        case Stmt::Verdict: {
          Flow f = verdict(e, s.verdict);
          return after(std::move(e), f);
        }
        case Stmt::Reject:
          record(e);
          trace::append_effect(&e.options, s.options);
          finish(e, Verdict::Reject);
          return;
        case Stmt::Masquerade:
        case Stmt::Snat: {
          record(e);
          const Stage& stg = e.plan[e.stage];
          if (stg.chain->type != "nat" || manip_of(stg.hook) != Manip::Src)
            return unknown(e, "source NAT outside a nat chain at input/postrouting");
          if (s.kind == Stmt::Masquerade) {
            e.masq = true;
            e.src_masq = true;
          } else {
            e.snat = s.nat_port ? trace::host_port(*s.nat_addr, *s.nat_port) : s.nat_addr->str();
            e.snat_src = s.nat_addr;
          }
          trace::append_effect(&e.options, s.options);
          e.ct_extra |= ir::kCtSnat;
          e.bound_src = true;
          return after(std::move(e), Flow::StageDone);
        }
        case Stmt::Dnat: {
          record(e);
          const Stage& stg = e.plan[e.stage];
          if (stg.chain->type != "nat" || manip_of(stg.hook) != Manip::Dst)
            return unknown(e, "dnat outside a nat chain at prerouting/output");
          u128 to = sem::addr_value(*s.nat_addr);
          trace::append_effect(&e.options, s.options);
          e.dnat = true;
          e.bound_dst = true;
          // The conntrack DNAT bit: only if the address or port changes.
          auto emit = [&](Exec c, uint16_t port, bool changed) {
            if (changed) c.ct_extra |= ir::kCtDnat;
            c.dst_set = true;
            c.dst = to;
            c.dport = port;
            after(std::move(c), Flow::StageDone);
          };
          if (e.dst_set) {
            uint16_t port = s.nat_port ? *s.nat_port : e.dport;
            bool changed = to != e.dst || port != e.dport;
            return emit(std::move(e), port, changed);
          }
          // The class's destination is one atom; DNAT addresses are atoms of their own.
          bool same_addr = e.k.dst.is_point() && e.k.dst.first() == to;
          if (s.nat_port) {
            uint16_t p = *s.nat_port;
            if (same_addr && e.k.dport.contains(p)) {
              Exec c = e;
              c.k.dport = PortSet::point(p);
              emit(std::move(c), p, false);
              e.k.dport = e.k.dport.subtract(p, p);
              if (e.k.empty(u)) return;
            }
            return emit(std::move(e), p, true);
          }
          // The port kept: a leaf per destination port (the outcome names it), a few only.
          uint64_t n = 0;
          for (const auto& [lo, hi] : e.k.dport.intervals()) n += uint64_t(hi) - lo + 1;
          if (n > 16) return unknown(e, "dnat keeping the destination port of a port range is not modelled");
          std::vector<uint32_t> ports;
          for (const auto& [lo, hi] : e.k.dport.intervals())
            for (uint32_t q = lo; q <= hi; ++q) ports.push_back(q);
          for (uint32_t q : ports) {
            Exec c = e;
            c.k.dport = PortSet::point(q);
            emit(std::move(c), static_cast<uint16_t>(q), !same_addr);
          }
          return;
        }
        case Stmt::MarkSet:
          record(e);
          switch (s.mark_op) {
            case '|': e.mc |= s.mark_value, e.mv |= s.mark_value; break;
            case '^': e.mv ^= s.mark_value & e.mc, e.mf ^= s.mark_value & ~e.mc; break;
            case '&': e.mc |= ~s.mark_value, e.mv &= s.mark_value; break;
            default: e.mc = ~0u, e.mv = s.mark_value, e.mf = 0; break;
          }
          break;
        case Stmt::Noop:
          record(e);
          break;
        case Stmt::Unknown:
          return unknown(e, "statement not modelled: " + s.text);
      }
    }
    record(e);
    next_rule(std::move(e));
  }

  void vmap(Exec& e, const Stmt& s, std::vector<PacketClass>& go) {
    std::vector<std::pair<PacketClass, std::string>> unk;
    for (auto& g : go) {
      std::vector<const std::vector<Range>*> els;
      std::vector<size_t> ids;
      std::vector<VerdictSpec> verdicts;
      const nft::Set* map = nullptr;
      if (s.anonymous) {
        for (size_t i = 0; i < s.elements.size(); ++i) els.push_back(&s.elements[i].key), ids.push_back(i);
      } else {
        map = e.plan[e.stage].table->find_set(s.set);
        if (!map) {
          unk.push_back({std::move(g), "map @" + s.set + " does not exist"});
          continue;
        }
        if (map->key.size() != s.key.fields.size()) {
          unk.push_back({std::move(g), "@" + s.set + ": key width differs"});
          continue;
        }
        Parsed& p = parsed_set(*map, s.key);
        for (uint32_t i : candidates(e, p)) els.push_back(p.els[i] ? &*p.els[i] : nullptr), ids.push_back(i);
      }
      ElemSplit es = split_elements(e, s.key, els, ids, g);
      for (auto& x : es.unknown) unk.push_back(std::move(x));
      for (auto& c : es.miss) next_rule(with(e, std::move(c)));
      for (auto& [c, i] : es.hit) {
        VerdictSpec v;
        if (s.anonymous) {
          v = s.elements[i].verdict;
        } else {
          const auto& el = map->elements[i];
          if (!el.value || !nft_trace::read_verdict(*el.value, &v)) {
            unk.push_back({std::move(c), "map @" + s.set + ": value not modelled"});
            continue;
          }
        }
        Exec x = with(e, std::move(c));
        // A map element's comment names its Service (kube-proxy's no-endpoint-services
        // elements), as the concrete tracer names it (nft_trace: element_services).
        if (!s.anonymous && map->elements[i].comment)
          add_service(x, trace::service_from_comment(*map->elements[i].comment));
        Flow f = verdict(x, v);
        after(std::move(x), f);
      }
    }
    unknown_parts(e, unk, s);
  }

  void after(Exec e, Flow f) {
    if (f == Flow::Finished) return;
    e.model = nullptr;
    e.rule = nullptr;
    if (f == Flow::StageDone) {
      e.stack.clear();
      ++e.stage;
    }
    work.push_back(std::move(e));
  }

  void fork_numgen(Exec e, const Key& k) {
    for (uint32_t v = 0; v < k.numgen_mod; ++v) {
      // The kernel's share (nft_trace::numgen_kernel_share): dyadic, count / 2^32.
      auto ceil_div = [](unsigned __int128 a, uint64_t b) { return static_cast<uint64_t>((a + b - 1) / b); };
      const unsigned __int128 two32 = static_cast<unsigned __int128>(1) << 32;
      uint64_t count = ceil_div((v + 1) * two32, k.numgen_mod) - ceil_div(v * two32, k.numgen_mod);
      Exec c = e;
      c.prob = e.prob * Probability::ratio_pow2(count, 32);
      c.numgen = k.numgen_offset + v;
      work.push_back(std::move(c));
    }
  }

  // ---------------------------------------------------------------- main loop

  void step(Exec e) {
    for (;;) {
      if (e.model) return exec_rule(std::move(e));
      if (e.stack.empty()) {
        if (e.stage >= e.plan.size()) return finish(e, Verdict::Accept);
        const Stage& s = e.plan[e.stage];
        if (s.route) {
          route(e);
          ++e.stage;
          continue;
        }
        if (e.last_hook && *e.last_hook != s.hook) {
          if (manip_of(*e.last_hook) == Manip::Dst) e.bound_dst = true;
          if (manip_of(*e.last_hook) == Manip::Src) e.bound_src = true;
        }
        e.last_hook = s.hook;
        const std::string& type = s.chain->type;
        if (type == "nat") {
          Manip m = manip_of(s.hook);
          bool bound = m == Manip::Dst ? e.bound_dst : m == Manip::Src ? e.bound_src : true;
          if (bound) {
            ++e.stage;
            continue;
          }
          // Only NEW packets meet nat chains: the others skip this stage.
          PacketClass fresh = e.k, other = e.k;
          uint64_t news = 0;
          for (unsigned i = 0; i < sem::kCtCombos; ++i)
            if ((sem::ct_combo_bits(i) | e.ct_extra) & ir::kCtNew) news |= uint64_t(1) << i;
          fresh.ct.bits &= news;
          other.ct.bits &= ~news;
          if (!other.empty(u)) {
            Exec o = with(e, std::move(other));
            ++o.stage;
            work.push_back(std::move(o));
          }
          if (fresh.empty(u)) return;
          e.k = std::move(fresh);
        } else if (type != "filter" && type != "route") {
          e.stack.push_back(Frame{s.chain, 0});
          return unknown(e, "chain type " + type + " not modelled (" + s.chain->name + ")");
        }
        e.stack.push_back(Frame{s.chain, 0});
      }
      Frame& f = e.stack.back();
      if (f.next >= f.chain->rules.size()) {
        Flow fl = frame_done(e);
        if (fl == Flow::Finished) return;
        if (fl == Flow::StageDone) {
          e.stack.clear();
          ++e.stage;
        }
        continue;
      }
      if (++e.evaluated > kMaxRulesPerPath)
        return unknown(e, "more than " + std::to_string(kMaxRulesPerPath) + " rules on one path (a goto cycle?)");
      const nft::Rule& r = f.chain->rules[f.next++];
      e.rule = &r;
      e.model = &model(r);
      e.stmt = 0;
      e.recorded = false;
      e.numgen.reset();
    }
  }

  std::vector<Leaf> explore(const PacketClass& start, Origin origin) {
    leaves.clear();
    Exec e;
    e.k = start;
    e.origin = origin;
    // Hooks outside the model that could see the packet first (as the tracer).
    for (const auto& [tb, c] : base_chains) {
      bool sees = tb->family == nft::Family::Netdev || tb->family == nft::Family::Inet;
      if (!sees || (c->hook != "ingress" && c->hook != "egress")) continue;
      if (origin == Origin::Node && c->hook == "ingress") continue;
      finish(e, Verdict::Unknown,
             "the " + c->hook + " chain " + std::string(nft::family_name(tb->family)) + " " + tb->name + " " + c->name +
                 " may see the packet: not modelled");
      return std::move(leaves);
    }
    if (origin == Origin::Node) {
      append(e, Hook::Output);
      append(e, Hook::Postrouting);
    } else {
      append(e, Hook::Prerouting);
    }
    Stage r;
    r.route = true;
    e.plan.push_back(r);
    work.push_back(std::move(e));
    while (!work.empty()) {
      Exec x = std::move(work.back());
      work.pop_back();
      if (x.k.empty(u)) continue;
      step(std::move(x));
    }
    return std::move(leaves);
  }
};

Explorer::Explorer(const nft::NftState& state, Universe& universe) : impl_(std::make_unique<Impl>(state, universe)) {}
Explorer::~Explorer() = default;
std::vector<Leaf> Explorer::explore(const PacketClass& start, Origin origin) { return impl_->explore(start, origin); }
std::vector<std::string> Explorer::sets_for(uint32_t id) const {
  auto it = impl_->sets_of.find(id);
  return it == impl_->sets_of.end() ? std::vector<std::string>{} : it->second;
}
uint32_t Explorer::client_id(const std::string& set) const {
  auto it = impl_->set_ids.find(set);
  return it == impl_->set_ids.end() ? 0 : it->second;
}

}  // namespace kpc::verifier::nft_sym
