#include "verifier/symbolic/engine.h"

#include <array>
#include <map>
#include <set>

#include "compiler/support/text.h"
#include "verifier/parse/parser.h"
#include "verifier/symbolic/affinity_lists.h"
#include "verifier/trace/physdev.h"

namespace kpc::verifier::symbolic {

namespace detail {
bool skip_missing_rules = true;
}  // namespace detail

using ir::ArgKind;
using ir::TableId;
using ir::TargetKind;
using trace::Probability;
using trace::Verdict;
// The packet classes and universe of the mode-neutral core (verifier/sem), which this
// front end splits and fills from iptables rules.
using sem::AddrSet;
using sem::ClientSet;
using sem::PacketClass;
using sem::PortSet;
using sem::ProtoSet;
using sem::SmallSet;
using sem::u128;
using sem::Universe;
using sem::addr_from_value;
using sem::addr_value;
using sem::cidr_range;
using sem::ct_combo_bits;
using sem::ct_new_only;
using sem::kCtCombos;
using sem::Leaf;
using sem::Origin;
using sem::SymOutcome;

namespace {

// ------------------------------------------------------------ save-text scanning

/// The leading base matches of a rule's canonical save text: iptables-save prints
/// "[!] -s A [!] -d A [!] -i IF [!] -o IF" before anything else.
struct Lead {
  bool has_d = false, neg_d = false;
  CIDR d;
  std::vector<std::string> ifaces;
};

Lead scan_lead(std::string_view t) {
  Lead l;
  size_t i = 0;
  bool neg = false;
  auto word = [&]() {
    while (i < t.size() && t[i] == ' ') ++i;
    size_t b = i;
    while (i < t.size() && t[i] != ' ') ++i;
    return t.substr(b, i - b);
  };
  for (int n = 0; n < 10; ++n) {
    std::string_view w = word();
    if (w == "!") {
      neg = true;
      continue;
    }
    if (w == "-s") {
      word();
    } else if (w == "-d") {
      if (auto c = CIDR::parse(word(), false, nullptr, true)) l.has_d = true, l.neg_d = neg, l.d = *c;
    } else if (w == "-i" || w == "-o") {
      l.ifaces.emplace_back(word());
    } else {
      break;
    }
    neg = false;
  }
  return l;
}

bool iface_matches(const std::string& pattern, const std::string& name) {
  if (!pattern.empty() && pattern.back() == '+')
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == name;
}

std::optional<int> proto_number(const std::string& text) {
  static const std::map<std::string, int> names = {
      {"all", 0},  {"tcp", 6}, {"udp", 17},   {"udplite", 136}, {"icmp", 1},      {"icmpv6", 58}, {"ipv6-icmp", 58},
      {"esp", 50}, {"ah", 51}, {"sctp", 132}, {"mh", 135},      {"ipv6-mh", 135}, {"gre", 47},    {"dccp", 33}};
  std::string l = to_lower(text);
  if (auto it = names.find(l); it != names.end()) return it->second;
  if (l.empty() || l.size() > 3) return std::nullopt;
  int v = 0;
  for (char c : l) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v <= 255 ? std::optional<int>(v) : std::nullopt;
}

bool parse_port_list(const std::string& text, PortSet* out) {
  *out = PortSet();
  for (auto part : split(text, ',')) {
    size_t colon = part.find(':');
    auto num = [](std::string_view s, uint32_t* v) {
      if (s.empty()) return false;
      *v = 0;
      for (char c : s) {
        if (c < '0' || c > '9') return false;
        *v = *v * 10 + static_cast<uint32_t>(c - '0');
        if (*v > 65535) return false;
      }
      return true;
    };
    uint32_t lo = 0, hi = 0;
    if (!num(part.substr(0, colon), &lo)) return false;
    hi = lo;
    if (colon != std::string_view::npos && !num(part.substr(colon + 1), &hi)) return false;
    if (lo > hi) continue;  // the kernel's inverted range matches nothing
    PortSet add = PortSet::range(lo, hi);
    *out = PortSet::range(0, 65535).subtract(PortSet::range(0, 65535).subtract(*out).subtract(add));
  }
  return true;
}

constexpr uint32_t kAddrLocal = 1u << 2;  // XT_ADDRTYPE_LOCAL

enum class Hook : uint8_t { Prerouting, Input, Forward, Output, Postrouting };
const char* hook_chain(Hook h) {
  static const char* const names[] = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"};
  return names[static_cast<int>(h)];
}

struct Stage {
  bool route = false;
  TableId table = TableId::Filter;
  Hook hook = Hook::Prerouting;
  bool loopback = false;
};

// ------------------------------------------------------------ compiled rules

/// One test of a rule, over one field of the class (or of the packet's state).
struct Cond {
  enum Kind : uint8_t {
    Proto, Src, Dst, InIface, OutIface, SPort, DPort, Ports /* multiport --ports */, SrcLocal, DstLocal,
    Ct, Mark, Client, Record, Set, Physdev, Connmark, Never, Unknown
  } kind = Never;
  trace::PhysdevOp physop = trace::PhysdevOp::In;  ///< Physdev: the option (atoms: ports its name matches)
  bool neg = false;
  ProtoSet proto;
  AddrSet addr;
  PortSet ports;
  std::string pattern;  ///< interfaces
  SmallSet atoms;       ///< interfaces: the atoms the pattern matches
  uint32_t value = 0, mask = 0;
  bool state_module = false;  ///< -m state ignores the SNAT/DNAT bits
  uint32_t client = 0;
  SmallSet ages;       ///< Client: the age buckets --seconds finds
  std::string pred;    ///< Unknown: the test as written when it is a fixed function of the packet where
                       ///< it stands (a predicate bit, shared by both rule sets); "" = stateful
  std::string effect;  ///< Client (--update/--remove: when found), Record (--set): the list write
  std::string set_name;        ///< Set: the ipset
  std::vector<bool> set_src;   ///< Set: per dimension, the packet's source (else destination)
  std::string why;
};

struct SymRule {
  bool bad = false;  ///< the text does not re-parse
  std::vector<Cond> conds;
  bool random = false;
  Probability p;
  ir::Target target;
  uint32_t service = 0;  ///< Universe::services id of the rule's comment
};

}  // namespace

// ------------------------------------------------------------ universe

Universe build_universe(const std::vector<const RulesetState*>& states, const std::vector<IPAddr>& local_addresses,
                        const ipset::Table* ipsets) {
  Universe u = sem::node_universe(states.empty() ? IPFamily::V4 : states[0]->family, local_addresses);
  u.ipsets = ipsets;
  bool v4 = u.family == IPFamily::V4;
  // The node's atoms (loopback, local addresses), then every rule's cut points.
  std::set<u128> cuts(u.dst_cuts.begin(), u.dst_cuts.end());
  auto cut = [&](u128 lo, u128 hi) {
    cuts.insert(lo);
    if (hi < u.addr_max) cuts.insert(hi + 1);
  };
  std::set<std::string> names, ports;
  std::set<uint32_t> seconds;
  std::set<const RuleStore*> seen;
  for (const RulesetState* s : states) {
    if (!seen.insert(s->store.get()).second) continue;
    for (size_t id = 0; id < s->store->size(); ++id) {
      const std::string_view t = s->store->text(static_cast<uint32_t>(id));
      Lead l = scan_lead(t);
      if (l.has_d && l.d.family() == u.family) {
        auto r = cidr_range(l.d);
        cut(r.first, r.second);
      }
      for (auto& n : l.ifaces) names.insert(n);
      // -m physdev port names: the bridge-port atoms.
      for (const char* opt : {" --physdev-in ", " --physdev-out "}) {
        std::string_view o(opt);
        for (size_t p = t.find(o); p != std::string_view::npos; p = t.find(o, p + 1)) {
          // The save text quotes some names ("vethwe+"): read one word as the parser does.
          size_t b = p + o.size();
          std::string w;
          if (b < t.size() && t[b] == '"') {
            for (size_t q = b + 1; q < t.size() && t[q] != '"'; ++q) {
              if (t[q] == '\\' && q + 1 < t.size()) ++q;
              w += t[q];
            }
          } else {
            size_t e = t.find(' ', b);
            w = std::string(t.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
          }
          ports.insert(std::move(w));
        }
      }
      // recent --seconds: the age buckets of remembered clients are cut at each value.
      for (size_t p = t.find(" --seconds "); p != std::string_view::npos; p = t.find(" --seconds ", p + 1)) {
        uint32_t v = 0;
        for (size_t q = p + 11; q < t.size() && t[q] >= '0' && t[q] <= '9'; ++q) v = v * 10 + uint32_t(t[q] - '0');
        if (v) seconds.insert(v);
      }
      // DNAT destinations: a class DNAT'ed to an address inside its own atom would need a split.
      size_t p = t.find(" --to-destination ");
      if (p != std::string::npos) {
        size_t b = p + 18, e = t.find(' ', b);
        std::string to(t.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (!to.empty() && to[0] == '[') to = to.substr(1, to.find(']') - 1);
        else if (v4) to = to.substr(0, to.find(':'));
        if (auto a = IPAddr::parse(to); a && a->family == u.family) cut(addr_value(*a), addr_value(*a));
      }
    }
  }
  if (ipsets)  // a set's addresses are destinations too (flags dst): cut at every entry
    for (const auto& [name, set] : ipsets->sets)
      if (set.family == u.family && !set.any_family)
        for (const auto& e : set.entries)
          for (size_t d = 0; d < set.dims.size(); ++d)
            if (set.dims[d] == ipset::DimKind::Addr) cut(e.dims[d].lo, e.dims[d].hi);
  u.dst_cuts.assign(cuts.begin(), cuts.end());
  // Beyond 63 cuts a --seconds test is Unknown (ages_below gives nullopt).
  for (uint32_t v : seconds)
    if (u.age_cuts.size() < 63) u.age_cuts.push_back(v);
  // Interface atoms: each literal name, a name for each prefix, and one name no rule mentions.
  std::set<std::string> reps;
  for (const auto& n : names) {
    if (n.empty() || n == "+") continue;
    if (n.back() == '+')
      reps.insert(n.substr(0, n.size() - 1) + "kpc0");
    else if (n != "lo")
      reps.insert(n);
  }
  reps.insert("kpc-other0");
  u.ifaces.assign(reps.begin(), reps.end());
  if (u.ifaces.size() > 63) u.ifaces.resize(63);  // iface tests beyond become Unknown (below)
  // Bridge-port atoms the same way, after [0] = no port.
  std::set<std::string> port_reps;
  for (const auto& n : ports) {
    if (n.empty() || n == "+") continue;
    port_reps.insert(n.back() == '+' ? n.substr(0, n.size() - 1) + "kpc0" : n);
  }
  port_reps.insert("kpc-port0");
  u.bridge_ports.insert(u.bridge_ports.end(), port_reps.begin(), port_reps.end());
  if (u.bridge_ports.size() > 63) u.bridge_ports.resize(63);  // physdev tests beyond become Unknown
  return u;
}

// ------------------------------------------------------------ the engine

struct Engine::Impl {
  const RulesetState& st;
  Universe& u;
  std::unordered_map<uint64_t, std::unique_ptr<SymRule>> rules;  // (table, id) -> compiled
  std::unordered_map<std::string, uint32_t> list_ids;           // recent --name -> affinity id
  std::map<uint32_t, std::vector<std::string>> lists_of;
  bool ifaces_capped = false;
  bool ports_capped = false;

  // Per chain: an index from destination atom to rule positions, for long chains.
  struct ChainIndex {
    std::vector<uint32_t> generic;                                   // positions every class visits
    std::unordered_map<uint32_t, std::vector<uint32_t>> by_atom;     // positions with a -d holding the atom
    std::unordered_map<uint32_t, std::vector<uint32_t>> merged;      // cache: atom -> sorted positions
  };
  std::unordered_map<const Chain*, ChainIndex> index;

  std::vector<Leaf> leaves;

  Impl(const RulesetState& s, Universe& uni) : st(s), u(uni) { read_affinity_lists(); }

  // kube-proxy names each recent list after its KUBE-SEP chain, which DNATs to one
  // endpoint; the canonical key (service + endpoint) survives chain renames.
  void read_affinity_lists() {
    const TableState& nat = st.table(TableId::Nat);
    ListUse use;
    for (const Chain& chain : nat.chains) {
      for (uint32_t id : chain.rules) {
        if (!st.store->names_list(id) || !list_use(st.store->text(id), &use)) continue;
        if (!list_ids.count(use.list) || use.sets) list_ids[use.list] = u.affinity_id(use.key);
      }
    }
    for (const auto& [list, aid] : list_ids) lists_of[aid].push_back(list);
  }

  uint32_t list_id(const std::string& list) {
    auto it = list_ids.find(list);
    if (it != list_ids.end()) return it->second;
    uint32_t aid = u.affinity_id("list " + list);
    list_ids[list] = aid;
    lists_of[aid].push_back(list);
    return aid;
  }

  const SymRule& rule(TableId t, std::string_view chain, uint32_t id) {
    uint64_t key = (uint64_t(static_cast<uint8_t>(t)) << 32) | id;
    auto it = rules.find(key);
    if (it != rules.end()) return *it->second;
    auto r = std::make_unique<SymRule>();
    compile(*r, t, chain, id);
    const SymRule& ref = *r;
    rules.emplace(key, std::move(r));
    return ref;
  }

  void compile(SymRule& out, TableId t, std::string_view chain, uint32_t id) {
    std::string text = "-A " + std::string(chain) + std::string(st.store->text(id));
    ParseOptions po;
    po.family = st.family;
    po.table = t;
    auto words = split_words(text);
    LineParse lp = parse_command(words, po, 1);
    if (lp.error || !lp.op || lp.op->kind != ir::OpKind::Append) {
      out.bad = true;
      return;
    }
    const ir::Rule& r = lp.op->rule;
    out.target = r.target;
    const auto& args = r.args;
    // why: what the model cannot evaluate; pred: the test as written if its result is a
    // fixed function of the packet at that point (else "": rate limits, counters, lists
    // that traffic writes — those stay three-valued Unknown outcomes).
    auto unknown = [&](std::string why, std::string pred = {}) {
      Cond c;
      c.kind = Cond::Unknown;
      c.why = std::move(why);
      c.pred = std::move(pred);
      out.conds.push_back(std::move(c));
    };
    auto written = [](const ir::Arg& a) {
      return std::string(a.neg ? "! " : "") + a.text2 + (a.text2.empty() || a.text.empty() ? "" : " ") + a.text;
    };
    std::string module;  // the module the current options belong to
    for (size_t i = 0; i < args.size(); ++i) {
      const ir::Arg& a = args[i];
      Cond c;
      c.neg = a.neg;
      switch (a.kind) {
        case ArgKind::Proto: {
          auto n = proto_number(a.text);
          if (!n) {
            unknown("protocol \"" + a.text + "\" not modelled", std::string(a.neg ? "! " : "") + "-p " + a.text);
            continue;
          }
          c.kind = Cond::Proto;
          c.proto = *n == 0 ? ProtoSet::all() : ProtoSet::of(static_cast<unsigned>(*n));
          break;
        }
        case ArgKind::Src:
        case ArgKind::Dst: {
          c.kind = a.kind == ArgKind::Src ? Cond::Src : Cond::Dst;
          auto rg = cidr_range(a.cidr);
          c.addr = AddrSet::range(rg.first, rg.second);
          break;
        }
        case ArgKind::InIface:
        case ArgKind::OutIface: {
          c.kind = a.kind == ArgKind::InIface ? Cond::InIface : Cond::OutIface;
          c.pattern = a.text;
          if (ifaces_capped) {
            unknown("more interface names than the engine tracks",
                    std::string(a.neg ? "! " : "") + (a.kind == ArgKind::InIface ? "-i " : "-o ") + a.text);
            continue;
          }
          for (unsigned k = 0; k < u.ifaces.size(); ++k)
            if (iface_matches(a.text, u.ifaces[k])) c.atoms.bits |= uint64_t(1) << k;
          break;
        }
        case ArgKind::Fragment:
          c.kind = Cond::Never;  // first packets of connections are not fragments
          break;
        case ArgKind::Module: {
          static const std::set<std::string> known = {"tcp",  "udp",    "sctp",      "comment", "addrtype",
                                                      "conntrack", "state", "mark", "statistic", "recent",
                                                      "nfacct",    "multiport", "set", "physdev", "connmark"};
          module = a.text;
          if (!known.count(a.text)) {
            // The whole instance is one test: the module and its options as written.
            static const std::set<std::string> stateful = {"limit", "hashlimit", "quota", "connlimit", "connbytes",
                                                           "rateest", "time", "cpu", "cluster", "nfacct"};
            std::string text = "-m " + a.text;
            size_t k = i + 1;
            for (; k < args.size() && args[k].kind == ArgKind::Unknown; ++k) text += " " + written(args[k]);
            i = k - 1;
            unknown("match " + text + " not modelled", stateful.count(a.text) ? std::string() : text);
            continue;
          }
          if (a.text == "connmark") {
            // (connmark & M) == V on the connection mark word (Exec::cc ...); the test as
            // written is the predicate when it reads an earlier connection's mark.
            trace::ConnmarkTest t = trace::read_connmark_match(args, i);
            std::string text = "-m connmark";
            for (; i + 1 < args.size() && args[i + 1].kind == ArgKind::Unknown; ++i) text += " " + written(args[i + 1]);
            if (!t.why.empty()) {
              unknown(t.why);
              continue;
            }
            c.kind = Cond::Connmark;
            c.value = t.value;
            c.mask = t.mask;
            c.neg = t.neg;
            c.pred = text;
            break;
          }
          if (a.text != "recent") continue;
          trace::RecentUse ru = trace::read_recent(args, i, st.family);
          if (std::string why = trace::recent_unmodelled(ru); !why.empty()) {
            unknown(why);
            continue;
          }
          if (out.random) {
            // The write would depend on the statistic branch taken before it.
            unknown("recent list written after a statistic match in the same rule (not modelled)");
            continue;
          }
          uint32_t id = list_id(ru.list);
          if (ru.cmd == trace::RecentUse::Cmd::Set) {
            c.kind = ru.neg ? Cond::Never : Cond::Record;  // "! --set" records and never matches
            c.effect = trace::affinity_effect_text(ru, u.affinity_keys[id]);
            break;
          }
          auto ages = u.ages_below(ru.seconds);
          if (!ages) {
            unknown("more distinct recent --seconds values than the engine tracks");
            continue;
          }
          c.kind = Cond::Client;
          c.neg = ru.neg;
          c.client = id;
          c.ages = *ages;
          if (ru.cmd != trace::RecentUse::Cmd::Rcheck) c.effect = trace::affinity_effect_text(ru, u.affinity_keys[id]);
          break;
        }
        case ArgKind::SPort:
        case ArgKind::DPort:
          c.kind = a.kind == ArgKind::SPort ? Cond::SPort : Cond::DPort;
          c.ports = a.value <= a.value2 ? PortSet::range(a.value, a.value2) : PortSet();
          break;
        case ArgKind::MultiPorts: {
          if (!parse_port_list(a.text, &c.ports)) {
            unknown("multiport list \"" + a.text + "\" not understood", "-m multiport " + written(a));
            continue;
          }
          c.kind = a.text2 == "--dports" ? Cond::DPort : a.text2 == "--sports" ? Cond::SPort : Cond::Ports;
          break;
        }
        case ArgKind::SrcType:
        case ArgKind::DstType: {
          bool limit = false;
          for (const auto& b : args) limit |= b.kind == ArgKind::LimitIfaceIn || b.kind == ArgKind::LimitIfaceOut;
          if (limit) continue;  // reported by the LimitIface arg
          c.kind = a.kind == ArgKind::SrcType ? Cond::SrcLocal : Cond::DstLocal;
          c.value = a.value;
          break;
        }
        case ArgKind::LimitIfaceIn:
        case ArgKind::LimitIfaceOut:
          {
            // The address types of one interface: fixed by the node's routing table.
            std::string text = "-m addrtype";
            for (const auto& b : args)
              if (b.kind == ArgKind::SrcType || b.kind == ArgKind::DstType)
                text += std::string(b.neg ? " !" : "") + (b.kind == ArgKind::SrcType ? " --src-type " : " --dst-type ") +
                        std::to_string(b.value);
            text += a.kind == ArgKind::LimitIfaceIn ? " --limit-iface-in" : " --limit-iface-out";
            unknown("addrtype --limit-iface-in/out not modelled", text);
          }
          continue;
        case ArgKind::CtState:
          c.kind = Cond::Ct;
          c.value = a.value;
          c.state_module = a.text2 == "--state";
          break;
        case ArgKind::MarkMatch:
          c.kind = Cond::Mark;
          c.value = a.value;
          c.mask = a.value2;
          break;
        case ArgKind::StatMode:
          if (a.text != "random") unknown("statistic --mode " + a.text + " depends on a packet counter");
          continue;
        case ArgKind::Probability: {
          Probability p = Probability::statistic_match(a.value);
          if (a.neg) p = p.complement();
          out.p = out.random ? out.p * p : p;
          out.random = true;
          continue;
        }
        case ArgKind::MatchSet: {
          // With the node's ipsets, the lookup is modelled (unless the instance has
          // options beyond the lookup, or a set reached is of a type not modelled).
          if (u.ipsets) {
            bool extra = false;
            for (size_t k = i + 1; k < args.size() && args[k].kind != ArgKind::Module; ++k)
              extra |= args[k].kind == ArgKind::Unknown;
            auto sets = ipset::reached(*u.ipsets, a.text);
            bool modelled = !extra && !sets.empty();
            for (const auto* s : sets) modelled &= s->unmodelled.empty();
            if (modelled) {
              c.kind = Cond::Set;
              c.set_name = a.text;
              c.set_src = ipset::parse_flags(a.text2);
              break;
            }
          }
          // A lookup is a fixed function of the packet unless the instance reads or
          // updates the set's counters.
          bool counters = false;
          for (size_t k = i + 1; k < args.size() && args[k].kind != ArgKind::Module; ++k)
            counters |= args[k].kind == ArgKind::Unknown && args[k].text2 != "--return-nomatch";
          std::string text = std::string(a.neg ? "! " : "") + "--match-set " + a.text + " " + a.text2;
          for (size_t k = i + 1; k < args.size() && args[k].kind != ArgKind::Module; ++k)
            if (args[k].kind == ArgKind::Unknown) text += " " + written(args[k]);
          unknown("ipset \"" + a.text + "\" contents not known", counters ? std::string() : "-m set " + text);
          continue;
        }
        case ArgKind::Physdev: {
          auto op = trace::physdev_op(a.text2);
          if (!op || ports_capped) {
            unknown(op ? "more bridge-port names than the engine tracks" : "physdev option " + a.text2 + " not modelled",
                    "-m physdev " + written(a));
            continue;
          }
          c.kind = Cond::Physdev;
          c.physop = *op;
          c.pattern = a.text;
          for (unsigned k = 1; k < u.bridge_ports.size(); ++k)
            if (trace::bridge_port_matches(a.text, u.bridge_ports[k])) c.atoms.bits |= uint64_t(1) << k;
          break;
        }
        case ArgKind::Unknown:
          // An option of a modelled module that the model does not read (--tcp-flags,
          // --ctstatus ...); the set module's counter options depend on traffic.
          if (module == "set") {
            // Read with --match-set (the lookup is one test); counters depend on traffic.
            if (a.text2 != "--return-nomatch") unknown("option " + a.text2 + " not modelled");
            continue;
          }
          unknown("option " + a.text2 + " not modelled", "-m " + module + " " + written(a));
          continue;
        case ArgKind::Comment:
          out.service = u.service_id(trace::service_from_comment(a.text));
          continue;
        case ArgKind::NfacctName:
          continue;  // counts packets, always matches
        case ArgKind::StatEvery:
        case ArgKind::StatPacket:
          continue;  // nth mode: reported with --mode
        case ArgKind::RecentCmd:
        case ArgKind::RecentSeconds:
        case ArgKind::RecentReap:
        case ArgKind::RecentHitcount:
        case ArgKind::RecentRttl:
        case ArgKind::RecentName:
        case ArgKind::RecentMask:
        case ArgKind::RecentSide:
          continue;  // read with their module (trace::read_recent)
      }
      out.conds.push_back(std::move(c));
    }
  }

  // ---------------------------------------------------------------- execution

  struct Frame {
    const Chain* chain = nullptr;
    uint32_t next = 0;                           ///< index into order (or rules)
    const std::vector<uint32_t>* order = nullptr;  ///< positions to visit (indexed chains)
  };

  struct Exec {
    PacketClass k;
    Origin origin = Origin::Arriving;
    bool dst_set = false;  ///< rewritten by DNAT: dst/dport are concrete
    u128 dst = 0;
    uint16_t dport = 0;
    bool ct_dnat = false, ct_snat = false;
    bool untracked = false;  ///< CT --notrack (trace/effects.h): state UNTRACKED whatever the class says
    /// The connection mark (CONNMARK, -m connmark): ct_base -1 = not read or written yet (the
    /// class's conntrack states decide), 0 = no conntrack entry, 1 = a new connection (mark 0),
    /// 2 = an earlier connection (its mark as it arrives). The word: bits in cc are cv, bits
    /// in cm are the arriving packet mark's xor cf, the others the arriving connmark's xor cf.
    int ct_base = -1;
    uint32_t cc = 0, cv = 0, cf = 0, cm = 0;
    bool ct_written = false;
    uint32_t mc = 0, mv = 0, mf = 0;  ///< mark function
    bool dnat = false, masq = false;
    std::string snat;
    std::string options;   ///< target options that are behaviour
    std::string affinity;  ///< recent lists written so far
    std::string mods;      ///< no-op targets that changed packet bytes the model ignores (predicate keys)
    std::vector<uint32_t> services;  ///< comments' services on the path, first seen first
    Probability prob;
    std::vector<Stage> plan;
    size_t stage = 0;
    std::vector<Frame> stack;
    const Chain* builtin = nullptr;
    std::string route;
  };

  // The atom of the current destination.
  uint32_t atom(const Exec& e) const {
    return static_cast<uint32_t>(u.atom_of(e.dst_set ? e.dst : e.k.dst.first()));
  }
  bool dst_local(const Exec& e) const { return u.local.contains(e.dst_set ? e.dst : e.k.dst.first()); }

  Frame enter(const Chain* c, const Exec& e) {
    Frame f{c, 0, nullptr};
    if (c->rules.size() < 48) return f;
    auto it = index.find(c);
    if (it == index.end()) it = index.emplace(c, build_index(*c)).first;
    ChainIndex& ix = it->second;
    uint32_t a = atom(e);
    // An atom no rule names with -d visits the generic rules alone: no copy of them per atom
    // (a node's 110,000 atoms each kept one of every large chain's, 4.4 GB at 10,000 Services).
    if (!ix.by_atom.count(a)) {
      f.order = &ix.generic;
      return f;
    }
    auto m = ix.merged.find(a);
    if (m == ix.merged.end()) {
      const std::vector<uint32_t>& named = ix.by_atom.at(a);
      std::vector<uint32_t> order;
      order.reserve(ix.generic.size() + named.size());
      std::merge(ix.generic.begin(), ix.generic.end(), named.begin(), named.end(), std::back_inserter(order));
      m = ix.merged.emplace(a, std::move(order)).first;
    }
    f.order = &m->second;
    return f;
  }

  ChainIndex build_index(const Chain& c) {
    ChainIndex ix;
    for (uint32_t pos = 0; pos < c.rules.size(); ++pos) {
      Lead l = scan_lead(st.store->text(c.rules[pos]));
      if (!l.has_d || l.neg_d || l.d.family() != u.family) {
        ix.generic.push_back(pos);
        continue;
      }
      auto r = cidr_range(l.d);
      size_t first = u.atom_of(r.first), last = u.atom_of(r.second);
      if (last - first >= 8) {
        ix.generic.push_back(pos);
        continue;
      }
      for (size_t a = first; a <= last; ++a) ix.by_atom[static_cast<uint32_t>(a)].push_back(pos);
    }
    return ix;
  }

  std::optional<std::string> in_iface(const Exec& e) const {
    const Stage& s = e.plan[e.stage];
    if (s.hook == Hook::Output || s.hook == Hook::Postrouting) return std::string();
    if (s.loopback) return std::string("lo");
    return std::nullopt;  // symbolic
  }
  std::optional<std::string> out_iface(const Exec& e) const {
    const Stage& s = e.plan[e.stage];
    if (s.hook == Hook::Prerouting || s.hook == Hook::Input) return std::string();
    if (e.origin == Origin::Node && dst_local(e)) return std::string("lo");
    return std::nullopt;
  }

  void finish(Exec& e, Verdict v, std::string why = {}) {
    if (e.prob.is_zero()) return;
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
    o.mark_value = e.mv;
    o.mark_flip = e.mf;
    o.options = e.options;
    if (e.ct_written) {
      o.connmark = true;
      o.ct_const = e.cc;
      o.ct_value = e.cv & e.cc;
      o.ct_from_mark = e.cm & ~e.cc;
      o.ct_flip = e.cf & ~e.cc;
    }
    o.affinity = e.affinity;
    o.unknown = std::move(why);
    l.services = e.services;
    leaves.push_back(std::move(l));
  }

  void route(Exec& e) {
    bool local = dst_local(e);
    auto add = [&](TableId tb, Hook h, bool loop = false) { e.plan.push_back(Stage{false, tb, h, loop}); };
    if (e.origin == Origin::Node) {
      if (local) {
        e.route = "local";
        add(TableId::Raw, Hook::Prerouting, true);
        add(TableId::Mangle, Hook::Prerouting, true);
        add(TableId::Mangle, Hook::Input, true);
        add(TableId::Filter, Hook::Input, true);
        add(TableId::Security, Hook::Input, true);
      } else {
        e.route = "output";
      }
      return;
    }
    if (local) {
      e.route = "local";
      add(TableId::Mangle, Hook::Input);
      add(TableId::Filter, Hook::Input);
      add(TableId::Security, Hook::Input);
      add(TableId::Nat, Hook::Input);
    } else {
      e.route = "forward";
      add(TableId::Mangle, Hook::Forward);
      add(TableId::Filter, Hook::Forward);
      add(TableId::Security, Hook::Forward);
      add(TableId::Mangle, Hook::Postrouting);
      add(TableId::Nat, Hook::Postrouting);
    }
  }

  // A part of a class with the verdict of the rule's tests so far.
  struct Part {
    PacketClass k;
    std::string unknown;  ///< a test could not be decided for this part
    std::string fx;       ///< recent lists this rule wrote for this part (before any later test failed)
  };

  // Splits class k by one test into the parts that pass and the parts that fail.
  // A concrete field (rewritten destination, a fixed interface) decides at once.
  // Where split(c, e, k) leaves the class whole, which side it goes to: +1 in (the test holds
  // for every packet of k), -1 out (for none), 0 split or not known here (split decides). Only
  // where split would hand on k itself, or a copy with the very same sets (a range set minus a
  // disjoint one keeps its intervals), so that skipping the split changes nothing.
  int whole(const Cond& c, const Exec& e, const PacketClass& k) const {
    if (!c.effect.empty()) return 0;
    auto side = [&](bool holds) { return holds != c.neg ? 1 : -1; };
    switch (c.kind) {
      case Cond::Never:
        return side(false);
      case Cond::Proto:
        if (k.proto.empty()) return 0;
        if ((k.proto & c.proto).empty()) return side(false);
        if (k.proto.minus(c.proto).empty()) return side(true);
        return 0;
      case Cond::Src:
        return k.src.overlaps(c.addr) ? 0 : side(false);
      case Cond::Dst:
        if (e.dst_set) return side(c.addr.contains(e.dst));
        return k.dst.overlaps(c.addr) ? 0 : side(false);
      case Cond::DPort:
        if (e.dst_set) return side(c.ports.contains(e.dport));
        return k.dport.overlaps(c.ports) ? 0 : side(false);
      case Cond::SrcLocal:
      case Cond::DstLocal: {
        const bool is_src = c.kind == Cond::SrcLocal;
        const bool local_ok = (c.value & kAddrLocal) != 0;
        const bool other_known = (c.value & ~kAddrLocal) == 0;
        if (!is_src && e.dst_set) {
          if (u.local.contains(e.dst)) return side(local_ok);
          return other_known ? side(false) : 0;
        }
        // No address of the class is local: the non-local part is the whole class.
        if (other_known && !(is_src ? k.src : k.dst).overlaps(u.local)) return side(false);
        return 0;
      }
      default:
        return 0;
    }
  }

  // Does the rule miss every packet of e.k, the class going on whole (its tests before the
  // failing one holding for all of it, none of them writing)?
  bool misses_whole(const SymRule& r, const Exec& e) const {
    for (const Cond& c : r.conds) {
      int w = whole(c, e, e.k);
      if (w < 0) return true;
      if (w == 0) return false;
    }
    return false;
  }

  void split(const Cond& c, const Exec& e, const PacketClass& k, std::vector<PacketClass>& in,
             std::vector<PacketClass>& out, std::string& unknown) {
    auto decide = [&](bool m) { (m != c.neg ? in : out).push_back(k); };
    auto two = [&](PacketClass&& yes, PacketClass&& no) {
      if (c.neg) std::swap(yes, no);
      if (!yes.empty(u)) in.push_back(std::move(yes));
      if (!no.empty(u)) out.push_back(std::move(no));
    };
    switch (c.kind) {
      case Cond::Never:
        decide(false);
        return;
      case Cond::Unknown: {
        std::optional<unsigned> b;
        if (!c.pred.empty()) b = pred_bit(e, c.pred);
        if (!b) {
          unknown = c.why;
          in.push_back(k);
          return;
        }
        split_pred(k, *b, in, out);
        return;
      }
      case Cond::Proto: {
        PacketClass y = k, n = k;
        y.proto = k.proto & c.proto;
        n.proto = k.proto.minus(c.proto);
        two(std::move(y), std::move(n));
        return;
      }
      case Cond::Src: {
        PacketClass y = k, n = k;
        y.src = k.src.intersect(c.addr);
        n.src = k.src.subtract(c.addr);
        two(std::move(y), std::move(n));
        return;
      }
      case Cond::Dst:
        if (e.dst_set) return decide(c.addr.contains(e.dst));
        {
          PacketClass y = k, n = k;
          y.dst = k.dst.intersect(c.addr);
          n.dst = k.dst.subtract(c.addr);
          two(std::move(y), std::move(n));
        }
        return;
      case Cond::SrcLocal:
      case Cond::DstLocal: {
        bool is_src = c.kind == Cond::SrcLocal;
        bool local_ok = (c.value & kAddrLocal) != 0;
        bool other_known = (c.value & ~kAddrLocal) == 0;  // only LOCAL asked: non-local addresses fail
        if (!is_src && e.dst_set) {
          bool l = u.local.contains(e.dst);
          if (l) return decide(local_ok);
          if (other_known) return decide(false);
          if (auto b = pred_bit(e, addrtype_test(c))) {
            split_pred(k, *b, c.neg ? out : in, c.neg ? in : out);
            return;
          }
          unknown = "address type other than LOCAL depends on the routing table";
          in.push_back(k);
          return;
        }
        PacketClass loc = k, non = k;
        (is_src ? loc.src : loc.dst) = (is_src ? k.src : k.dst).intersect(u.local);
        (is_src ? non.src : non.dst) = (is_src ? k.src : k.dst).subtract(u.local);
        if (!loc.empty(u)) (local_ok != c.neg ? in : out).push_back(std::move(loc));
        if (!non.empty(u)) {
          if (other_known)
            (c.neg ? in : out).push_back(std::move(non));
          else if (auto b = pred_bit(e, addrtype_test(c))) {
            // Decided by the routing table for these addresses: a predicate.
            split_pred(non, *b, c.neg ? out : in, c.neg ? in : out);
          } else {
            unknown_parts.push_back(Part{std::move(non), "address type other than LOCAL depends on the routing table", {}});
          }
        }
        return;
      }
      case Cond::InIface:
      case Cond::OutIface: {
        auto name = c.kind == Cond::InIface ? in_iface(e) : out_iface(e);
        if (name) return decide(iface_matches(c.pattern, *name));
        PacketClass y = k, n = k;
        SmallSet& ys = c.kind == Cond::InIface ? y.in_iface : y.out_iface;
        SmallSet& ns = c.kind == Cond::InIface ? n.in_iface : n.out_iface;
        ys.bits &= c.atoms.bits;
        ns.bits &= ~c.atoms.bits;
        two(std::move(y), std::move(n));
        return;
      }
      case Cond::SPort: {
        PacketClass y = k, n = k;
        y.sport = k.sport.intersect(c.ports);
        n.sport = k.sport.subtract(c.ports);
        two(std::move(y), std::move(n));
        return;
      }
      case Cond::DPort:
        if (e.dst_set) return decide(c.ports.contains(e.dport));
        {
          PacketClass y = k, n = k;
          y.dport = k.dport.intersect(c.ports);
          n.dport = k.dport.subtract(c.ports);
          two(std::move(y), std::move(n));
        }
        return;
      case Cond::Ports: {
        // Either port listed: (dport in L) or (dport not in L and sport in L).
        bool dport_in = false;
        PacketClass by_d = k, rest = k;
        if (e.dst_set) {
          dport_in = c.ports.contains(e.dport);
          if (dport_in) rest.sport = PortSet();
          else by_d.sport = PortSet();
        } else {
          by_d.dport = k.dport.intersect(c.ports);
          rest.dport = k.dport.subtract(c.ports);
        }
        PacketClass by_s = rest, none = rest;
        by_s.sport = rest.sport.intersect(c.ports);
        none.sport = rest.sport.subtract(c.ports);
        auto& yes = c.neg ? out : in;
        auto& no = c.neg ? in : out;
        if (!by_d.empty(u)) yes.push_back(std::move(by_d));
        if (!by_s.empty(u)) yes.push_back(std::move(by_s));
        if (!none.empty(u)) no.push_back(std::move(none));
        return;
      }
      case Cond::Ct: {
        if (e.untracked) return decide((ir::kCtUntracked & c.value) != 0);
        PacketClass y = k, n = k;
        y.ct.bits = 0;
        n.ct.bits = 0;
        uint32_t extra = (e.ct_dnat ? uint32_t(ir::kCtDnat) : 0u) | (e.ct_snat ? uint32_t(ir::kCtSnat) : 0u);
        for (unsigned i = 0; i < kCtCombos; ++i) {
          if (!k.ct.has(i)) continue;
          uint32_t bits = ct_combo_bits(i) | extra;
          if (c.state_module) bits &= ~(ir::kCtSnat | ir::kCtDnat);
          ((bits & c.value) ? y.ct : n.ct).bits |= uint64_t(1) << i;
        }
        two(std::move(y), std::move(n));
        return;
      }
      case Cond::Mark: {
        // Current mark bit b: e.mv's bit if b is in e.mc, else the arriving bit xor e.mf.
        uint32_t m = c.mask;
        if (((e.mv ^ c.value) & m & e.mc) != 0) return decide(false);  // a fixed bit differs
        uint32_t free = m & ~e.mc;
        if (free == 0) return decide(true);
        PacketClass need = PacketClass::everything(u);
        need.mark_known = free;
        need.mark_value = (c.value ^ e.mf) & free;
        return split_by(k, need, c.neg, in, out);
      }
      case Cond::Client: {
        // Found: remembered by this list and seen within --seconds (whole age buckets).
        PacketClass need = PacketClass::everything(u);
        need.client = ClientSet::only(c.client);
        need.age = c.ages;
        return split_by(k, need, c.neg, in, out);
      }
      case Cond::Record:
        in.push_back(k);
        return;
      case Cond::Set:
        split_set(c, e, k, in, out);
        return;
      case Cond::Physdev:
        split_physdev(c, e, k, in, out);
        return;
      case Cond::Connmark:
        split_connmark(c, e, k, in, out);
        return;
    }
  }

  // The conntrack entry at this stage: none in the raw table (conntrack runs after it,
  // but the loopback re-entry has its entry) or once untracked.
  bool ct_stage(const Exec& e) const {
    const Stage& s = e.plan[e.stage];
    return !(s.table == TableId::Raw && !s.loopback) && !e.untracked && e.ct_base != 0;
  }
  // k by conntrack state: no entry (INVALID, UNTRACKED), a new connection, an earlier one.
  std::array<PacketClass, 3> ct_groups(const PacketClass& k) const {
    uint64_t none = 0;
    for (unsigned i = 0; i < kCtCombos; ++i)
      if (i / 4 == 0 || i / 4 == 4) none |= uint64_t(1) << i;
    std::array<PacketClass, 3> g{k, k, k};
    g[0].ct.bits &= none;
    g[1].ct.bits &= ct_new_only().bits;
    g[2].ct.bits &= ~none & ~ct_new_only().bits;
    return g;
  }

  // -m connmark --mark V/M: false without a conntrack entry, negated or not.
  void split_connmark(const Cond& c, const Exec& e, const PacketClass& k, std::vector<PacketClass>& in,
                      std::vector<PacketClass>& out) {
    auto put = [&](PacketClass&& p, bool pass) {
      if (!p.empty(u)) (pass ? in : out).push_back(std::move(p));
    };
    if (!ct_stage(e)) return put(PacketClass(k), false);
    auto on_word = [&](PacketClass&& p, uint32_t cc, uint32_t cv, uint32_t cf, uint32_t cm) {
      uint32_t m = c.mask;
      if ((c.value & ~m) || ((cv ^ c.value) & m & cc)) return put(std::move(p), c.neg);  // a fixed bit differs
      uint32_t free = m & ~cc;
      if (!free) return put(std::move(p), !c.neg);
      if (free & ~cm) {
        // Reads an earlier connection's mark: a fixed function of the packet.
        if (auto b = pred_bit(e, c.pred)) {
          std::vector<PacketClass> y, n;
          split_pred(p, *b, y, n);
          for (auto& x : y) put(std::move(x), true);
          for (auto& x : n) put(std::move(x), false);
          return;
        }
        unknown_parts.push_back(Part{std::move(p), "the connection's mark is not known (" + c.pred + ")", {}});
        return;
      }
      PacketClass need = PacketClass::everything(u);  // bits the arriving packet mark gave
      need.mark_known = free;
      need.mark_value = (c.value ^ cf) & free;
      split_by(p, need, c.neg, in, out);
    };
    if (e.ct_base > 0) return on_word(PacketClass(k), e.cc, e.cv, e.cf, e.cm);
    auto g = ct_groups(k);
    put(std::move(g[0]), false);
    if (!g[1].empty(u)) on_word(std::move(g[1]), ~0u, 0, 0, 0);  // a new connection's mark is 0
    if (!g[2].empty(u)) on_word(std::move(g[2]), 0, 0, 0, 0);
  }

  // CONNMARK on the words, bit by bit: each bit is fixed, the arriving mark's or the
  // arriving connmark's (flipped). A bit that would be the xor of both is not modelled,
  // nor a mark restored from an earlier connection's mark.
  std::optional<std::string> connmark_apply(Exec& g, const trace::ConnmarkOp& op) {
    enum Kind : uint8_t { Fixed, FromMark, FromCt };
    struct Bit {
      Kind k;
      bool v;
    };
    auto ct_bit = [&](uint32_t b) {
      if (g.cc & b) return Bit{Fixed, (g.cv & b) != 0};
      return Bit{(g.cm & b) ? FromMark : FromCt, (g.cf & b) != 0};
    };
    auto mark_bit = [&](uint32_t b) {
      if (g.mc & b) return Bit{Fixed, (g.mv & b) != 0};
      return Bit{FromMark, (g.mf & b) != 0};
    };
    auto xr = [](Bit a, Bit b) -> std::optional<Bit> {
      if (a.k == Fixed) return Bit{b.k, b.v != a.v};
      if (b.k == Fixed) return Bit{a.k, a.v != b.v};
      if (a.k == b.k) return Bit{Fixed, a.v != b.v};
      return std::nullopt;
    };
    const Bit zero{Fixed, false};
    uint32_t cc = 0, cv = 0, cf = 0, cm = 0, mc = 0, mv = 0, mf = 0;
    for (unsigned i = 0; i < 32; ++i) {
      uint32_t b = 1u << i;
      Bit ct = (op.ctmask & b) ? zero : ct_bit(b);
      std::optional<Bit> r;
      if (op.kind == trace::ConnmarkOp::Kind::Set) r = xr(ct, Bit{Fixed, (op.value & b) != 0});
      if (op.kind == trace::ConnmarkOp::Kind::Save) r = xr(ct, (op.nfmask & b) ? mark_bit(b) : zero);
      if (op.kind == trace::ConnmarkOp::Kind::Restore)
        r = xr((op.nfmask & b) ? zero : mark_bit(b), (op.ctmask & b) ? ct_bit(b) : zero);
      if (!r) return std::string("CONNMARK: a bit that is the packet mark's xor an earlier connection mark's (not modelled)");
      if (op.kind == trace::ConnmarkOp::Kind::Restore) {
        if (r->k == FromCt) return std::string("CONNMARK --restore-mark of an earlier connection's mark (not modelled)");
        if (r->k == Fixed) mc |= b, mv |= r->v ? b : 0;
        else mf |= r->v ? b : 0;
        continue;
      }
      if (r->k == Fixed) cc |= b, cv |= r->v ? b : 0;
      else cf |= r->v ? b : 0, cm |= r->k == FromMark ? b : 0;
    }
    if (op.kind == trace::ConnmarkOp::Kind::Restore) {
      g.mc = mc, g.mv = mv, g.mf = mf;
    } else {
      g.cc = cc, g.cv = cv, g.cf = cf, g.cm = cm;
      g.ct_written = true;
    }
    return std::nullopt;
  }

  // -m physdev (trace/physdev.h): the class split on its bridge ports. Packets the node
  // sends carry no bridge information; an arriving packet has it iff it entered a
  // bridge port (bridge_in atom != 0); its out port exists only in FORWARD/POSTROUTING.
  void split_physdev(const Cond& c, const Exec& e, const PacketClass& k, std::vector<PacketClass>& in,
                     std::vector<PacketClass>& out) const {
    const Stage& s = e.plan[e.stage];
    auto put = [&](PacketClass&& p, bool pass) {
      if (!p.empty(u)) (pass ? in : out).push_back(std::move(p));
    };
    if (e.origin == Origin::Node || s.loopback) return put(PacketClass(k), c.neg);
    const uint64_t none = 1;  // atom 0
    PacketClass bare = k;     // entered through no bridge port
    bare.bridge_in.bits &= none;
    put(std::move(bare), c.neg);
    PacketClass info = k;
    info.bridge_in.bits &= ~none;
    if (info.empty(u)) return;
    bool out_hook = s.hook == Hook::Forward || s.hook == Hook::Postrouting;
    // The atoms of one field where the option passes: the rest fails.
    auto by = [&](SmallSet PacketClass::*field, uint64_t pass_bits) {
      PacketClass y = info, n = info;
      (y.*field).bits &= pass_bits;
      (n.*field).bits &= ~pass_bits;
      put(std::move(y), true);
      put(std::move(n), false);
    };
    const uint64_t ports = ~none;  // every atom naming a port
    switch (c.physop) {
      case trace::PhysdevOp::IsIn:
        return put(std::move(info), !c.neg);
      case trace::PhysdevOp::In:
        return by(&PacketClass::bridge_in, c.neg ? ports & ~c.atoms.bits : c.atoms.bits);
      case trace::PhysdevOp::IsOut:
      case trace::PhysdevOp::IsBridged:
        if (!out_hook) return put(std::move(info), c.neg);
        return by(&PacketClass::bridge_out, c.neg ? none : ports);
      case trace::PhysdevOp::Out:
        if (!out_hook) return put(std::move(info), false);
        return by(&PacketClass::bridge_out, c.neg ? ports & ~c.atoms.bits : c.atoms.bits);
    }
  }

  // -m set on the node's ipsets (ipset/ipset.h): the class split by every entry of the set
  // (of each member of a list:set, in order), most specific prefix first so that a
  // hash:net nomatch entry decides what it covers. After DNAT the destination is concrete.
  void split_set(const Cond& c, const Exec& e, const PacketClass& k, std::vector<PacketClass>& in,
                 std::vector<PacketClass>& out) {
    std::vector<PacketClass> yes, rest{k};
    for (const ipset::Set* s : ipset::reached(*u.ipsets, c.set_name)) {
      if (s->type == "list:set" || c.set_src.size() < s->dims.size() || (!s->any_family && s->family != u.family))
        continue;
      bool port_dims = std::find(s->dims.begin(), s->dims.end(), ipset::DimKind::Port) != s->dims.end();
      if (port_dims) {
        // bitmap:port on ICMP/ICMPv6/UDP-Lite reads a type/code or a port the model lacks.
        ProtoSet odd = ProtoSet::of(1);
        odd.w[0] |= ProtoSet::of(58).w[0];
        odd.w[2] |= ProtoSet::of(136).w[2];
        std::vector<PacketClass> kept;
        for (auto& r : rest) {
          PacketClass o = r;
          o.proto = r.proto & odd;
          if (!o.empty(u)) unknown_parts.push_back(Part{std::move(o), "bitmap:port on ICMP/UDP-Lite not modelled", {}});
          r.proto = r.proto.minus(odd);
          if (!r.empty(u)) kept.push_back(std::move(r));
        }
        rest = std::move(kept);
      }
      std::vector<PacketClass> no_here;  // nomatch parts: not in this set (a later member may hold them)
      for (const ipset::Entry& en : s->entries) {
        if (rest.empty()) break;
        PacketClass need = PacketClass::everything(u);
        bool skip = false;
        for (size_t d = 0; d < s->dims.size() && !skip; ++d) {
          bool src = c.set_src[d];
          const ipset::Range& r = en.dims[d];
          if (s->dims[d] == ipset::DimKind::Addr) {
            if (!src && e.dst_set) skip = !(e.dst >= r.lo && e.dst <= r.hi);
            else (src ? need.src : need.dst) = AddrSet::range(r.lo, r.hi);
            continue;
          }
          ProtoSet protos = s->dims[d] == ipset::DimKind::ProtoPort ? ProtoSet::of(en.proto) : ProtoSet::of(6);
          if (s->dims[d] == ipset::DimKind::Port) {
            protos.w[0] |= ProtoSet::of(17).w[0];
            protos.w[2] |= ProtoSet::of(132).w[2];
          }
          need.proto = need.proto & protos;
          uint32_t lo = static_cast<uint32_t>(r.lo), hi = static_cast<uint32_t>(r.hi);
          if (!src && e.dst_set) skip = !(e.dport >= lo && e.dport <= hi);
          else (src ? need.sport : need.dport) = PortSet::range(lo, hi);
        }
        if (skip) continue;
        std::vector<PacketClass> next;
        for (auto& r : rest) {
          PacketClass inter = r.intersect(need);
          if (inter.empty(u)) {
            next.push_back(std::move(r));
            continue;
          }
          (en.nomatch ? no_here : yes).push_back(std::move(inter));
          for (auto& piece : r.subtract(need, u)) next.push_back(std::move(piece));
        }
        rest = std::move(next);
      }
      for (auto& n : no_here) rest.push_back(std::move(n));
    }
    // yes: in the set; rest: in none of them.
    for (auto& y : yes) (c.neg ? out : in).push_back(std::move(y));
    for (auto& r : rest) (c.neg ? in : out).push_back(std::move(r));
  }

  // ------------------------------------------------------------ predicates
  // A test the model cannot evaluate, but whose result is a fixed function of the
  // packet as it is at that point, becomes a bit of the class: both values are
  // explored. The bit is keyed by the test as written and by everything the
  // traversal has done to the packet so far, so the two rule sets share a bit exactly
  // when they ask the same question of the same packet — and identical unknowns
  // compare equal while a difference that depends on one is "may differ".
  std::string where(const Exec& e) const {
    const Stage& st = e.plan[e.stage];
    std::string w = std::string(ir::table_name(st.table)) + " " + hook_chain(st.hook);
    if (st.loopback) w += " (lo)";
    w += e.origin == Origin::Node ? ", from the node" : ", arriving";
    if (e.dst_set) w += ", after DNAT to " + trace::host_port(addr_from_value(e.dst, u.family), e.dport);
    std::string key = w;
    if (e.dst_set) key += "|dnat " + std::to_string(static_cast<uint64_t>(e.dst >> 64)) + ":" +
                          std::to_string(static_cast<uint64_t>(e.dst)) + ":" + std::to_string(e.dport);
    char b[160];
    std::snprintf(b, sizeof b, "|mark %x/%x/%x|ct %d%d%d|masq %d|ctm %d %x/%x/%x/%x", e.mc, e.mv, e.mf, e.ct_dnat,
                  e.ct_snat, e.untracked, e.masq, e.ct_base, e.cc, e.cv, e.cf, e.cm);
    key += b;
    key += "|" + e.snat + "|" + e.options + "|" + e.affinity + "|" + e.mods;
    return w + "\x1f" + key;
  }
  std::optional<unsigned> pred_bit(const Exec& e, const std::string& test) {
    std::string w = where(e);
    size_t sep = w.find('\x1f');
    return u.pred_bit(test + "@" + w.substr(sep + 1), test + " (" + w.substr(0, sep) + ")");
  }
  static std::string addrtype_test(const Cond& c) {
    static const char* names[] = {"UNSPEC",  "UNICAST", "LOCAL",  "BROADCAST", "ANYCAST", "MULTICAST",
                                  "BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE"};
    std::string t;
    for (unsigned b = 0; b < 12; ++b)
      if (c.value & (1u << b)) t += (t.empty() ? "" : ",") + std::string(names[b]);
    return std::string("-m addrtype ") + (c.kind == Cond::SrcLocal ? "--src-type " : "--dst-type ") + t;
  }
  // Both values of predicate bit b (unless the class fixes it): true -> yes, false -> no.
  void split_pred(const PacketClass& k, unsigned b, std::vector<PacketClass>& yes, std::vector<PacketClass>& no) {
    uint64_t bit = uint64_t(1) << b;
    if (k.pred_known & bit) {
      ((k.pred_value & bit) ? yes : no).push_back(k);
      return;
    }
    PacketClass y = k, n = k;
    y.pred_known |= bit;
    y.pred_value |= bit;
    n.pred_known |= bit;
    n.pred_value &= ~bit;
    yes.push_back(std::move(y));
    no.push_back(std::move(n));
  }

  // k split by a class: the part inside `need` passes (fails when negated), the rest fails.
  void split_by(const PacketClass& k, const PacketClass& need, bool neg, std::vector<PacketClass>& in,
                std::vector<PacketClass>& out) const {
    PacketClass y = k.intersect(need);
    std::vector<PacketClass> ns = k.subtract(need, u);
    if (!y.empty(u)) (neg ? out : in).push_back(std::move(y));
    for (auto& n : ns) (neg ? in : out).push_back(std::move(n));
  }

  static void add_service(Exec& e, uint32_t s) {
    if (s && std::find(e.services.begin(), e.services.end(), s) == e.services.end()) e.services.push_back(s);
  }

  std::vector<Part> unknown_parts;  // side channel of split() for three-valued address types

  enum class Flow : uint8_t { Continue, StageDone, Finished };

  Flow frame_done(Exec& e) {
    e.stack.pop_back();
    if (!e.stack.empty()) return Flow::Continue;
    if (e.builtin->policy == "DROP") {
      finish(e, Verdict::Drop);
      return Flow::Finished;
    }
    return Flow::StageDone;
  }

  Flow apply_target(Exec& e, const SymRule& r) {
    const Stage& s = e.plan[e.stage];
    const ir::Target& tg = r.target;
    auto unknown = [&](std::string why) {
      finish(e, Verdict::Unknown, std::move(why));
      return Flow::Finished;
    };
    switch (tg.kind) {
      case TargetKind::None:
        return Flow::Continue;
      case TargetKind::Jump:
      case TargetKind::Goto: {
        const Chain* c = st.find(s.table, tg.chain);
        if (!c) return unknown("jump to missing chain " + tg.chain);
        if (e.stack.size() >= 128) return unknown("chain depth beyond 128");
        Frame f = enter(c, e);
        if (tg.kind == TargetKind::Goto)
          e.stack.back() = f;
        else
          e.stack.push_back(f);
        return Flow::Continue;
      }
      case TargetKind::Accept:
        return Flow::StageDone;
      case TargetKind::Drop:
        finish(e, Verdict::Drop);
        return Flow::Finished;
      case TargetKind::Reject:
        if (s.hook != Hook::Input && s.hook != Hook::Forward && s.hook != Hook::Output)
          return unknown("REJECT outside INPUT/FORWARD/OUTPUT (the kernel refuses it)");
        trace::append_effect(&e.options, trace::target_options_text(tg, u.family));
        finish(e, Verdict::Reject);
        return Flow::Finished;
      case TargetKind::Return:
        return frame_done(e);
      case TargetKind::DNAT: {
        if (s.table != TableId::Nat || (s.hook != Hook::Prerouting && s.hook != Hook::Output))
          return unknown("DNAT outside nat PREROUTING/OUTPUT (the kernel refuses it)");
        if (tg.to_port_lo != tg.to_port_hi) return unknown("DNAT to a port range: the port is chosen at run time");
        if (tg.to_port_zero) return unknown("DNAT to port 0: the port the kernel picks is not modelled");
        if (tg.to_addr && tg.to_addr->family != u.family) return unknown("DNAT to an address of the other family");
        if (!e.dst_set && !tg.to_port_lo && !e.k.dport.is_point())
          return unknown("DNAT without a port on a class of destination ports (not modelled)");
        if (!e.dst_set && !tg.to_addr && !e.k.dst.is_point())
          return unknown("DNAT without an address on a class of destinations (not modelled)");
        u128 old_dst = e.dst_set ? e.dst : e.k.dst.first();
        uint16_t old_port = e.dst_set ? e.dport : static_cast<uint16_t>(e.k.dport.first());
        bool dst_point = e.dst_set || e.k.dst.is_point();
        bool port_point = e.dst_set || e.k.dport.is_point();
        u128 nd = tg.to_addr ? addr_value(*tg.to_addr) : old_dst;
        uint16_t np = tg.to_port_lo ? tg.to_port_lo : old_port;
        // The conntrack DNAT bit is set when the tuple changes. Destination atoms are
        // cut at every DNAT address, so "same address" is decided for the whole class
        // unless the class's ports straddle the target port.
        bool same_addr = dst_point && nd == old_dst;
        if (same_addr && !port_point && e.k.dport.contains(np))
          return unknown("DNAT to the class's own address and one of its ports (not modelled)");
        if (!(same_addr && port_point && np == old_port)) e.ct_dnat = true;
        e.dst_set = true;
        e.dst = nd;
        e.dport = np;
        e.dnat = true;
        trace::append_effect(&e.options, trace::target_options_text(tg, u.family));
        return Flow::StageDone;
      }
      case TargetKind::SNAT:
        if (s.table != TableId::Nat || (s.hook != Hook::Postrouting && s.hook != Hook::Input))
          return unknown("SNAT outside nat POSTROUTING/INPUT (the kernel refuses it)");
        e.snat = trace::snat_outcome_text(tg);
        e.ct_snat = true;
        return Flow::StageDone;
      case TargetKind::Masquerade:
        if (s.table != TableId::Nat || s.hook != Hook::Postrouting)
          return unknown("MASQUERADE outside nat POSTROUTING (the kernel refuses it)");
        e.masq = true;
        e.ct_snat = true;
        trace::append_effect(&e.options, trace::target_options_text(tg, u.family));
        return Flow::StageDone;
      case TargetKind::Mark: {
        uint32_t mask = tg.mark_mask, val = tg.mark_value;
        // (m & ~mask) ^ val on the mark function.
        uint32_t keep_const = e.mc & ~mask;
        e.mv = ((e.mv ^ val) & keep_const) | (val & mask);
        e.mf ^= val & ~mask & ~e.mc;
        e.mc |= mask;
        return Flow::Continue;
      }
      case TargetKind::Other:
        if (trace::is_noop_target(tg.chain)) {
          // Nothing the outcome holds changes, but a later unmodelled test might read
          // what CHECKSUM wrote: predicates after it are other questions.
          if (tg.chain == "CHECKSUM") e.mods += "CHECKSUM;";
          return Flow::Continue;
        }
        if (tg.chain == "CONNMARK") {
          trace::ConnmarkOp op = trace::read_connmark_target(tg);
          if (!op.why.empty()) return unknown(op.why);
          if (!ct_stage(e)) return Flow::Continue;  // no conntrack entry: nothing to mark
          if (e.ct_base < 0) {
            // First use: the class's conntrack states decide what the word is.
            auto g = ct_groups(e.k);
            std::vector<Exec> parts;
            for (int base = 0; base < 3; ++base) {
              if (g[base].empty(u)) continue;
              Exec x = e;
              x.k = std::move(g[base]);
              x.ct_base = base;
              x.cc = base == 1 ? ~0u : 0u;  // a new connection's mark is 0
              x.cv = x.cf = x.cm = 0;
              parts.push_back(std::move(x));
            }
            for (size_t i = 1; i < parts.size(); ++i) {
              Exec& x = parts[i];
              if (x.ct_base > 0)
                if (auto why = connmark_apply(x, op)) {
                  finish(x, Verdict::Unknown, *why);
                  continue;
                }
              run(std::move(x));  // continues after this rule (the frame is past it)
            }
            e = std::move(parts[0]);
            if (e.ct_base == 0) return Flow::Continue;
          }
          if (auto why = connmark_apply(e, op)) return unknown(*why);
          return Flow::Continue;
        }
        if (trace::CtTarget ct = trace::ct_target(tg); ct != trace::CtTarget::NotCt) {
          if (ct == trace::CtTarget::Unmodelled)
            return unknown("target " + tg.chain + " (options other than --notrack) not modelled");
          if (s.table != TableId::Raw) return unknown("target " + tg.chain + " outside the raw table (the kernel refuses it)");
          if (s.loopback || e.untracked) return Flow::Continue;  // conntrack already attached
          e.untracked = true;
          trace::append_effect(&e.options, "notrack");
          return Flow::Continue;
        }
        return unknown("target " + tg.chain + " not modelled");
    }
    return Flow::Continue;
  }

  void after_target(Exec&& e, const SymRule& r) {
    Flow fl = apply_target(e, r);
    if (fl == Flow::Finished) return;
    if (fl == Flow::StageDone) {
      e.stack.clear();
      ++e.stage;
    }
    run(std::move(e));
  }

  void run(Exec e) {
    for (;;) {
      if (e.stack.empty()) {
        if (e.stage >= e.plan.size()) {
          finish(e, Verdict::Accept);
          return;
        }
        const Stage& s = e.plan[e.stage];
        if (s.route) {
          route(e);
          ++e.stage;
          continue;
        }
        const TableState& tb = st.table(s.table);
        if (!tb.present) {
          ++e.stage;
          continue;
        }
        if (s.table == TableId::Nat && e.untracked) {
          ++e.stage;  // no conntrack, no NAT
          continue;
        }
        if (s.table == TableId::Nat) {
          // The nat table sees NEW packets only: split the class on that.
          PacketClass other = e.k;
          other.ct.bits &= ~ct_new_only().bits;
          e.k.ct.bits &= ct_new_only().bits;
          if (!other.ct.empty()) {
            Exec skip = e;
            skip.k = std::move(other);
            ++skip.stage;
            if (e.k.ct.empty()) {
              e = std::move(skip);
              continue;
            }
            run(std::move(skip));
          } else if (e.k.ct.empty()) {
            ++e.stage;
            continue;
          }
        }
        const Chain* b = st.find(s.table, hook_chain(s.hook));
        if (!b) {
          ++e.stage;
          continue;
        }
        e.builtin = b;
        e.stack.push_back(enter(b, e));
      }
      Frame& f = e.stack.back();
      size_t limit = f.order ? f.order->size() : f.chain->rules.size();
      if (f.next >= limit) {
        Flow fl = frame_done(e);
        if (fl == Flow::Finished) return;
        if (fl == Flow::StageDone) {
          e.stack.clear();
          ++e.stage;
        }
        continue;
      }
      uint32_t pos = f.order ? (*f.order)[f.next] : f.next;
      ++f.next;
      uint32_t id = f.chain->rules[pos];
      const SymRule& r = rule(e.plan[e.stage].table, f.chain->name, id);
      if (r.bad) {
        finish(e, Verdict::Unknown, "rule text does not re-parse: -A " + std::string(f.chain->name) + std::string(st.store->text(id)));
        return;
      }
      // A rule no packet of the class can match goes by untouched (what splitting would
      // give, without copying the class three times a test: every destination atom walks
      // the `--dst-type LOCAL` rules of KUBE-EXTERNAL-SERVICES, ~110,000 atoms at 10,000
      // Services).
      if (detail::skip_missing_rules && misses_whole(r, e)) continue;
      // Split the class through the rule's tests, in order: a recent list written by a
      // test stays written when a later test of the rule fails (the kernel stops at the
      // first failing match, after the earlier ones ran).
      std::vector<Part> in{Part{e.k, {}, {}}};
      std::vector<Part> miss;
      for (const Cond& c : r.conds) {
        std::vector<Part> next_in;
        for (Part& p : in) {
          if (!c.effect.empty()) {
            split_writing(c, e, std::move(p), next_in, miss);
            continue;
          }
          std::vector<PacketClass> yes, no;
          std::string unk;
          unknown_parts.clear();
          split(c, e, p.k, yes, no, unk);
          for (auto& y : yes) next_in.push_back(Part{std::move(y), unk.empty() ? p.unknown : unk, p.fx});
          for (auto& up : unknown_parts) next_in.push_back(Part{std::move(up.k), up.unknown, p.fx});
          for (auto& n : no) miss.push_back(Part{std::move(n), {}, p.fx});
        }
        in = std::move(next_in);
        if (in.empty()) break;
      }
      // Matching parts: the target (or Unknown); missing parts go on to the next rule.
      if (in.size() == 1 && miss.empty() && in[0].unknown.empty()) {
        // The whole class matches: no copy.
        trace::append_effect(&e.affinity, in[0].fx);
        add_service(e, r.service);
        if (r.random && !r.p.is_one()) {
          Exec m = e;
          m.prob = m.prob * r.p;
          after_target(std::move(m), r);
          e.prob = e.prob * r.p.complement();
          if (e.prob.is_zero()) return;
          continue;
        }
        Flow fl = apply_target(e, r);
        if (fl == Flow::Finished) return;
        if (fl == Flow::StageDone) {
          e.stack.clear();
          ++e.stage;
        }
        continue;
      }
      for (Part& p : in) {
        Exec m = e;
        m.k = std::move(p.k);
        trace::append_effect(&m.affinity, p.fx);
        add_service(m, r.service);
        if (!p.unknown.empty()) {
          finish(m, Verdict::Unknown, p.unknown + " (-A " + std::string(f.chain->name) + std::string(st.store->text(id)) + ")");
          continue;
        }
        if (r.random && !r.p.is_one()) {
          Exec nm = m;
          nm.prob = nm.prob * r.p;
          after_target(std::move(nm), r);
          m.prob = m.prob * r.p.complement();
          if (m.prob.is_zero()) continue;
          run(std::move(m));  // continues after this rule (frame already advanced)
          continue;
        }
        after_target(std::move(m), r);
      }
      if (miss.empty()) return;
      for (size_t i = 1; i < miss.size(); ++i) {
        Exec o = e;
        o.k = std::move(miss[i].k);
        trace::append_effect(&o.affinity, miss[i].fx);
        run(std::move(o));
      }
      e.k = std::move(miss[0].k);
      trace::append_effect(&e.affinity, miss[0].fx);
    }
  }

  // A test that writes a recent list: --set (Record) writes for every packet that
  // reaches it; --update/--remove (Client with an effect) write when the client is
  // found, whichever way `!` turns the result.
  void split_writing(const Cond& c, const Exec& e, Part&& p, std::vector<Part>& in, std::vector<Part>& miss) {
    std::string fx = p.fx;
    trace::append_effect(&fx, c.effect);
    if (c.kind == Cond::Record) {
      in.push_back(Part{std::move(p.k), p.unknown, std::move(fx)});
      return;
    }
    Cond found_test = c;
    found_test.neg = false;
    std::vector<PacketClass> found, rest;
    std::string unk;
    split(found_test, e, p.k, found, rest, unk);
    for (auto& k : found) (c.neg ? miss : in).push_back(Part{std::move(k), c.neg ? std::string() : p.unknown, fx});
    for (auto& k : rest) (c.neg ? in : miss).push_back(Part{std::move(k), c.neg ? p.unknown : std::string(), p.fx});
  }

  std::vector<Leaf> explore(const PacketClass& start, Origin origin) {
    leaves.clear();
    Exec e;
    e.k = start;
    e.origin = origin;
    auto add = [&](TableId tb, Hook h) { e.plan.push_back(Stage{false, tb, h, false}); };
    if (origin == Origin::Node) {
      e.k.in_iface = SmallSet::all(static_cast<unsigned>(u.ifaces.size()));  // not used: no input interface
      add(TableId::Raw, Hook::Output);
      add(TableId::Mangle, Hook::Output);
      add(TableId::Nat, Hook::Output);
      add(TableId::Filter, Hook::Output);
      add(TableId::Security, Hook::Output);
      add(TableId::Mangle, Hook::Postrouting);
      add(TableId::Nat, Hook::Postrouting);
    } else {
      add(TableId::Raw, Hook::Prerouting);
      add(TableId::Mangle, Hook::Prerouting);
      add(TableId::Nat, Hook::Prerouting);
    }
    e.plan.push_back(Stage{true});
    run(std::move(e));
    return std::move(leaves);
  }
};

Engine::Engine(const RulesetState& state, Universe& universe)
    : impl_(std::make_unique<Impl>(state, universe)), u_(universe) {
  impl_->ifaces_capped = universe.ifaces.size() >= 63;
  impl_->ports_capped = universe.bridge_ports.size() >= 63;
}
Engine::~Engine() = default;

std::vector<Leaf> Engine::explore(const PacketClass& start, Origin origin) { return impl_->explore(start, origin); }

std::vector<std::string> Engine::lists_for(uint32_t affinity_id) const {
  auto it = impl_->lists_of.find(affinity_id);
  return it == impl_->lists_of.end() ? std::vector<std::string>{} : it->second;
}

uint32_t Engine::client_id(const std::string& list) const {
  auto it = impl_->list_ids.find(list);
  return it == impl_->list_ids.end() ? 0 : it->second;
}

size_t Engine::rules_read() const { return impl_->rules.size(); }

}  // namespace kpc::verifier::symbolic
