#include "verifier/trace/tracer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "compiler/ir/printer.h"
#include "compiler/support/text.h"
#include "verifier/parse/parser.h"
#include "verifier/trace/physdev.h"

namespace kpc::verifier::trace {

using ir::ArgKind;
using ir::TableId;
using ir::TargetKind;

const char* origin_name(Origin o) {
  switch (o) {
    case Origin::Pod:
      return "pod";
    case Origin::Node:
      return "node";
    case Origin::External:
      return "external";
  }
  return "?";
}

std::optional<Origin> origin_from_name(std::string_view s) {
  if (s == "pod") return Origin::Pod;
  if (s == "node") return Origin::Node;
  if (s == "external") return Origin::External;
  return std::nullopt;
}

std::optional<uint8_t> proto_from_name(std::string_view s) {
  std::string l = to_lower(s);
  if (l == "tcp") return kProtoTCP;
  if (l == "udp") return kProtoUDP;
  if (l == "sctp") return kProtoSCTP;
  return std::nullopt;
}

const char* proto_name(uint8_t p) {
  switch (p) {
    case kProtoTCP:
      return "tcp";
    case kProtoUDP:
      return "udp";
    case kProtoSCTP:
      return "sctp";
  }
  return "?";
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Accept:
      return "ACCEPT";
    case Verdict::Drop:
      return "DROP";
    case Verdict::Reject:
      return "REJECT";
    case Verdict::Unknown:
      return "UNKNOWN";
  }
  return "?";
}

Probability TraceResult::total() const {
  Probability t = Probability::zero();
  for (const auto& o : outcomes) t = t + o.probability;
  return t;
}

std::string host_port(const IPAddr& a, uint16_t port) {
  if (a.family == IPFamily::V6) return "[" + a.str() + "]:" + std::to_string(port);
  return a.str() + ":" + std::to_string(port);
}

std::string service_from_comment(std::string_view comment) {
  size_t i = 0;
  while (i < comment.size()) {
    while (i < comment.size() && comment[i] == ' ') ++i;
    size_t j = i;
    while (j < comment.size() && comment[j] != ' ') ++j;
    std::string_view w = comment.substr(i, j - i);
    size_t slash = w.find('/');
    if (slash != std::string_view::npos && slash > 0 && slash + 1 < w.size()) return std::string(w);
    i = j;
  }
  return "";
}

namespace {

// -------------------------------------------------------------- helpers

/// iptables' interface match: "eth+" is a prefix, anything else the exact name.
bool iface_matches(const std::string& pattern, const std::string& name) {
  if (!pattern.empty() && pattern.back() == '+')
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == name;
}

/// Protocol number of a -p value (name or number); nullopt if not known.
std::optional<int> proto_number(const std::string& text) {
  static const std::map<std::string, int> names = {
      {"all", 0},  {"tcp", 6}, {"udp", 17},   {"udplite", 136}, {"icmp", 1},      {"icmpv6", 58}, {"ipv6-icmp", 58},
      {"esp", 50}, {"ah", 51}, {"sctp", 132}, {"mh", 135},      {"ipv6-mh", 135}, {"gre", 47},    {"dccp", 33}};
  std::string l = to_lower(text);
  auto it = names.find(l);
  if (it != names.end()) return it->second;
  if (l.empty() || l.size() > 3) return std::nullopt;
  int v = 0;
  for (char c : l) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v <= 255 ? std::optional<int>(v) : std::nullopt;
}

bool parse_port_list(const std::string& text, std::vector<std::pair<uint32_t, uint32_t>>* out) {
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
    out->push_back({lo, hi});
  }
  return true;
}

constexpr uint32_t kAddrLocal = 1u << 2;  // XT_ADDRTYPE_LOCAL

enum class Hook : uint8_t { Prerouting, Input, Forward, Output, Postrouting };
const char* hook_chain(Hook h) {
  switch (h) {
    case Hook::Prerouting:
      return "PREROUTING";
    case Hook::Input:
      return "INPUT";
    case Hook::Forward:
      return "FORWARD";
    case Hook::Output:
      return "OUTPUT";
    case Hook::Postrouting:
      return "POSTROUTING";
  }
  return "?";
}

struct Stage {
  enum Kind : uint8_t { Table, Route } kind = Table;
  TableId table = TableId::Filter;
  Hook hook = Hook::Prerouting;
  bool loopback = false;  ///< node -> local: the packet comes back in on lo
};

enum class Tri : uint8_t { False, True, Unknown };

struct Frame {
  const Chain* chain = nullptr;
  uint32_t next = 0;
  bool indexed = false;            ///< index looked up (on the frame's first step)
  const ChainIndex* index = nullptr;
};

struct Exec {
  IPAddr dst;
  uint16_t dport = 0;
  uint32_t mark = 0;
  uint32_t ct = 0;
  bool notrack = false;  ///< CT --notrack: untracked from here on
  // The connection mark (CONNMARK): value and the bits known; read from the packet on first use.
  bool ct_init = false, ct_written = false;
  uint32_t ctv = 0, ctk = 0;
  bool dnat = false;
  bool masq = false;
  std::string snat;
  std::string options;              ///< target options that are behaviour (effects.h)
  std::vector<RecentUse> affinity;  ///< recent lists written so far
  Probability prob;
  std::vector<Step> path;
  std::vector<std::string> services;  ///< without paths (TraceOptions::record_paths): named so far
  std::vector<Stage> plan;
  size_t stage = 0;
  std::vector<Frame> stack;
  const Chain* builtin = nullptr;  ///< built-in chain of the current stage (its policy)
  std::string route;
  // -m ipvs: decided only in a walk whose caller knows what IPVS did (trace_stages).
  bool ipvs_known = false;
  std::optional<IpvsProperty> ipvs;
};

enum class Flow : uint8_t { Continue, StageDone, Finished };

}  // namespace

// ------------------------------------------------------------------ Tracer

// xt_ipvs (net/netfilter/xt_ipvs.c): --ipvs alone tests the property; every other option
// needs it (false without) and compares the connection's virtual service. Options
// [first, end) of args. nullopt with *why for what is not modelled (--vportctl).
static std::optional<bool> ipvs_match(const std::vector<ir::Arg>& args, size_t first, size_t end,
                               const std::optional<IpvsProperty>& p, std::string* why) {
  bool only_property = true;
  for (size_t k = first; k < end; ++k)
    if (args[k].text2 != "--ipvs") only_property = false;
  if (first == end) {
    *why = "-m ipvs without options";
    return std::nullopt;
  }
  if (only_property) return p.has_value() != args[first].neg;
  if (!p) return false;
  for (size_t k = first; k < end; ++k) {
    const ir::Arg& a = args[k];
    bool m = false;
    if (a.text2 == "--ipvs") {
      m = true;
    } else if (a.text2 == "--vproto") {
      auto n = proto_number(a.text);
      if (!n) {
        *why = "-m ipvs --vproto " + a.text + " not understood";
        return std::nullopt;
      }
      m = *n == p->vproto;
    } else if (a.text2 == "--vaddr") {
      auto c = CIDR::parse(a.text, false, nullptr, true);
      if (!c) {
        *why = "-m ipvs --vaddr " + a.text + " not understood";
        return std::nullopt;
      }
      m = c->contains(p->vaddr);
    } else if (a.text2 == "--vport") {
      uint32_t v = 0;
      bool digits = !a.text.empty() && a.text.size() <= 5;
      for (char c : a.text) digits = digits && c >= '0' && c <= '9', v = v * 10 + uint32_t(c - '0');
      if (!digits || v > 65535) {
        *why = "-m ipvs --vport " + a.text + " not understood";
        return std::nullopt;
      }
      m = v == p->vport;
    } else if (a.text2 == "--vdir") {
      if (a.text != "ORIGINAL" && a.text != "REPLY") {
        *why = "-m ipvs --vdir " + a.text + " not understood";
        return std::nullopt;
      }
      m = a.text == "ORIGINAL";  // the traced packet is the request
    } else if (a.text2 == "--vmethod") {
      m = a.text == p->vmethod;
    } else {
      *why = "-m ipvs " + a.text2 + " not modelled";
      return std::nullopt;
    }
    if (m == a.neg) return false;
  }
  return true;
}


// ------------------------------------------------------------------ chain index

namespace {
// An address with the bits beyond its family's length cleared: the key CIDR::contains compares.
IPAddr address_key(const IPAddr& a) {
  IPAddr k = a;
  for (size_t i = a.bit_length() / 8; i < k.bytes.size(); ++i) k.bytes[i] = 0;
  return k;
}
struct AddrHash {
  size_t operator()(const IPAddr& a) const {
    uint64_t h = 1469598103934665603ull ^ static_cast<uint8_t>(a.family);
    for (uint8_t b : a.bytes) h = (h ^ b) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};
}  // namespace

struct ChainIndex {
  const uint32_t* data = nullptr;  ///< the chain's rule vector when built (a changed chain is re-read)
  size_t size = 0;
  std::unordered_map<IPAddr, std::vector<uint32_t>, AddrHash> by_dst;  ///< positions, ascending
  std::unordered_map<uint32_t, std::vector<uint32_t>> by_port;         ///< (proto << 16 | port)
  std::vector<uint32_t> rest;                                          ///< read in every walk

  /// The first position >= from whose rule can match a packet to (dst, proto, dport), or size.
  /// A skipped rule requires another destination address, or another protocol and port: the
  /// plain walk finds it false (a false match decides a rule: evaluate's any_false) with no
  /// effect (the rule writes no recent list), so skipping it changes nothing.
  uint32_t next(uint32_t from, const IPAddr& dst, uint8_t proto, uint16_t dport) const {
    uint32_t best = static_cast<uint32_t>(size);
    auto take = [&](const std::vector<uint32_t>& v) {
      auto it = std::lower_bound(v.begin(), v.end(), from);
      if (it != v.end() && *it < best) best = *it;
    };
    take(rest);
    if (!by_dst.empty())
      if (auto it = by_dst.find(address_key(dst)); it != by_dst.end()) take(it->second);
    if (!by_port.empty())
      if (auto it = by_port.find(uint32_t(proto) << 16 | dport); it != by_port.end()) take(it->second);
    return best;
  }
};

namespace {
// What a rule requires of every packet it can match: an exact destination address, else an
// exact protocol and destination port; neither: nullopt in both. Only for rules whose
// result on any other destination is a plain false: no -m recent (whose list writes happen
// before a later false match decides the rule).
struct Requirement {
  std::optional<IPAddr> dst;
  std::optional<uint32_t> proto_port;
};
Requirement requirement(const ir::Rule& r) {
  Requirement q;
  std::optional<int> proto;
  std::optional<uint16_t> port;
  for (const auto& a : r.args) {
    if (a.kind == ArgKind::RecentCmd || (a.kind == ArgKind::Module && a.text == "recent")) return {};
    if (a.neg) continue;
    if (a.kind == ArgKind::Dst && a.cidr.is_host() && !q.dst) q.dst = address_key(a.cidr.addr);
    if (a.kind == ArgKind::Proto && !proto) {
      auto n = proto_number(a.text);
      if (n && *n != 0) proto = *n;
    }
    if (a.kind == ArgKind::DPort && a.value == a.value2 && a.value <= 65535 && !port)
      port = static_cast<uint16_t>(a.value);
  }
  if (!q.dst && proto && port) q.proto_port = uint32_t(*proto) << 16 | *port;
  return q;
}
}  // namespace

const ChainIndex* Tracer::chain_index(TableId t, const Chain& c) {
  if (!options_.index_chains || c.rules.size() < std::max<size_t>(options_.index_min_rules, 1)) return nullptr;
  std::unique_ptr<ChainIndex>& slot = index_[&c];
  if (slot && slot->data == c.rules.data() && slot->size == c.rules.size()) return slot.get();
  slot = std::make_unique<ChainIndex>();
  ChainIndex& ix = *slot;
  ix.data = c.rules.data();
  ix.size = c.rules.size();
  for (uint32_t pos = 0; pos < c.rules.size(); ++pos) {
    const ir::Rule* r = rule(t, c.name, c.rules[pos]);
    Requirement q = r ? requirement(*r) : Requirement{};
    if (q.dst)
      ix.by_dst[*q.dst].push_back(pos);
    else if (q.proto_port)
      ix.by_port[*q.proto_port].push_back(pos);
    else
      ix.rest.push_back(pos);
  }
  return slot.get();
}

struct Tracer::Impl {
  Tracer& t;
  const Packet& pkt;
  TraceResult result;
  Probability truncated = Probability::zero();
  bool truncating = false;

  Impl(Tracer& tr, const Packet& p) : t(tr), pkt(p) {}

  const TableState& table(TableId id) const { return t.state_.table(id); }

  // Interfaces the current stage sees: nullopt = not known, "" = none.
  std::optional<std::string> in_iface(const Exec& e) const {
    const Stage& s = e.plan[e.stage];
    if (s.hook == Hook::Output || s.hook == Hook::Postrouting) return std::string();
    if (s.loopback) return std::string("lo");
    return pkt.in_iface;
  }
  std::optional<std::string> out_iface(const Exec& e) const {
    const Stage& s = e.plan[e.stage];
    if (s.hook == Hook::Prerouting || s.hook == Hook::Input) return std::string();
    if (pkt.origin == Origin::Node && t.is_local(e.dst)) return std::string("lo");
    return pkt.out_iface;
  }

  // The packet has a conntrack entry here: not in the raw table (conntrack runs after it,
  // except on the loopback re-entry), not untracked, not INVALID.
  bool has_ct(const Exec& e) const {
    const Stage& s = e.plan[e.stage];
    if (s.table == TableId::Raw && !s.loopback) return false;
    return !e.notrack && !(e.ct & (ir::kCtInvalid | ir::kCtUntracked));
  }
  // The connection mark (value, known bits) as it stands.
  std::pair<uint32_t, uint32_t> ct_mark(const Exec& e) const {
    if (e.ct_init) return {e.ctv, e.ctk};
    if (pkt.ctstate & ir::kCtNew) return {0u, ~0u};  // a new connection's mark is 0
    if (pkt.ctmark) return {*pkt.ctmark, ~0u};
    return {0u, 0u};
  }

  Step make_step(Step::Kind kind, const Exec& e, const Frame& f, uint32_t id, std::string note = {}) {
    Step s;
    s.kind = kind;
    s.table = e.plan[e.stage].table;
    s.chain = f.chain->name;
    s.rule_no = f.next;  // already advanced past the rule: 1-based position
    s.text = "-A " + std::string(f.chain->name) + std::string(t.state_.store->text(id));
    s.note = std::move(note);
    if (const ir::Rule* r = t.rule(s.table, s.chain, id))
      for (const auto& a : r->args)
        if (a.kind == ArgKind::Comment) s.comment = a.text;
    return s;
  }

  // A rule on the path: its Step (the note is made only then), or without paths the service
  // its comment names (what finish would read from the Step).
  template <typename Note>
  void add_step(Exec& e, Step::Kind kind, const Frame& f, uint32_t id, Note note) {
    if (t.options_.record_paths) {
      e.path.push_back(make_step(kind, e, f, id, note()));
      return;
    }
    const std::string& svc = t.rule_service(e.plan[e.stage].table, f.chain->name, id);
    if (!svc.empty() && std::find(e.services.begin(), e.services.end(), svc) == e.services.end())
      e.services.push_back(svc);
  }
  void add_step(Exec& e, Step::Kind kind, const Frame& f, uint32_t id) {
    add_step(e, kind, f, id, [] { return std::string(); });
  }

  void finish(Exec& e, Verdict v, std::string reason = {}) {
    if (e.prob.is_zero()) return;
    if (truncating || result.outcomes.size() >= t.options_.max_outcomes) {
      truncating = true;
      truncated = truncated + e.prob;
      return;
    }
    Outcome o;
    o.probability = e.prob;
    o.verdict = v;
    if (v == Verdict::Accept) o.route = e.route;
    o.dnat = e.dnat;
    if (e.dnat) {
      o.dnat_addr = e.dst;
      o.dnat_port = e.dport;
      o.dnat_text = host_port(e.dst, e.dport);
    }
    o.masquerade = e.masq;
    o.snat_text = e.snat;
    o.final_mark = e.mark;
    o.options = e.options;
    if (e.ct_written) append_effect(&o.options, connmark_effect_text(e.ctv, e.ctk));
    o.affinity = e.affinity;
    o.unknown_reason = std::move(reason);
    for (const auto& s : e.path) {
      if (s.comment.empty()) continue;
      std::string svc = service_from_comment(s.comment);
      if (!svc.empty() && std::find(o.services.begin(), o.services.end(), svc) == o.services.end())
        o.services.push_back(svc);
    }
    if (!t.options_.record_paths) o.services = std::move(e.services);
    o.path = std::move(e.path);
    result.outcomes.push_back(std::move(o));
  }

  // After PREROUTING (or OUTPUT + POSTROUTING): the routing decision on the current destination.
  void route(Exec& e) {
    bool local = t.is_local(e.dst);
    auto add = [&](TableId tb, Hook h, bool loop = false) {
      Stage s;
      s.table = tb;
      s.hook = h;
      s.loopback = loop;
      e.plan.push_back(s);
    };
    if (pkt.origin == Origin::Node) {
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

  struct Eval {
    Tri tri = Tri::True;
    Probability p;        ///< statistic factor when True
    bool random = false;  ///< a statistic match took part
    std::string why;      ///< Unknown: what could not be decided
    std::vector<RecentUse> fx;  ///< recent lists written (whatever the rule's result)
  };

  Eval evaluate(const ir::Rule& r, const Exec& e) {
    Eval ev;
    bool any_false = false;
    bool fx_uncertain = false;  // a list write after an undecided test
    auto unknown = [&](std::string why) {
      if (ev.why.empty()) ev.why = std::move(why);
    };
    auto decide = [&](bool m, bool neg) {
      if (m == neg) any_false = true;
    };
    const auto& args = r.args;
    for (size_t i = 0; i < args.size(); ++i) {
      const ir::Arg& a = args[i];
      switch (a.kind) {
        case ArgKind::Proto: {
          auto n = proto_number(a.text);
          if (!n) {
            unknown("protocol \"" + a.text + "\" not modelled");
            break;
          }
          decide(*n == 0 || *n == pkt.proto, a.neg);
          break;
        }
        case ArgKind::Src:
          decide(a.cidr.contains(pkt.src), a.neg);
          break;
        case ArgKind::Dst:
          decide(a.cidr.contains(e.dst), a.neg);
          break;
        case ArgKind::InIface:
        case ArgKind::OutIface: {
          bool in = a.kind == ArgKind::InIface;
          auto name = in ? in_iface(e) : out_iface(e);
          if (!name) {
            unknown(std::string(in ? "input" : "output") + " interface of the packet not given (" +
                    (in ? "--in-iface" : "--out-iface") + ")");
            break;
          }
          decide(iface_matches(a.text, *name), a.neg);
          break;
        }
        case ArgKind::Fragment:
          decide(false, a.neg);
          break;  // the traced packet is not a fragment
        case ArgKind::Module: {
          static const std::set<std::string> known = {
              "tcp",       "udp",    "sctp",   "comment",   "addrtype", "conntrack", "state", "mark",
              "statistic", "recent", "nfacct", "multiport", "set",      "physdev", "connmark", "ipvs"};  // set, physdev: by option
          if (!known.count(a.text)) unknown("match module \"" + a.text + "\" not modelled");
          if (a.text == "ipvs") {
            size_t first = i + 1;
            while (i + 1 < args.size() && args[i + 1].kind == ArgKind::Unknown) ++i;  // its options
            if (!e.ipvs_known) {
              unknown("-m ipvs: whether IPVS handled the packet is not known in an iptables trace (trace the IPVS "
                      "program set)");
              break;
            }
            std::string why;
            auto m = ipvs_match(args, first, i + 1, e.ipvs, &why);
            if (!m)
              unknown(why);
            else if (!*m)
              any_false = true;
            break;
          }
          if (a.text == "connmark") {
            ConnmarkTest ct = read_connmark_match(args, i);
            while (i + 1 < args.size() && args[i + 1].kind == ArgKind::Unknown) ++i;  // its options
            if (!ct.why.empty()) {
              unknown(ct.why);
              break;
            }
            if (!has_ct(e)) {
              any_false = true;  // no conntrack entry: false, negated or not
              break;
            }
            auto [v, k] = ct_mark(e);
            if (ct.mask & ~k) {
              unknown("the connection's mark is not known (a first packet's is 0; give --ctmark)");
              break;
            }
            decide((v & ct.mask) == ct.value, ct.neg);
            break;
          }
          if (a.text == "recent") {
            // Matches run in order and stop at the first false one: the list is written
            // only when every earlier test passed (a later false test does not undo it).
            RecentUse r = read_recent(args, i, pkt.src.family);
            bool reached = !any_false && ev.why.empty();
            bool writes = r.cmd != RecentUse::Cmd::Rcheck;
            if (writes && !any_false && !ev.why.empty()) fx_uncertain = true;
            if (std::string why = recent_unmodelled(r); !why.empty()) {
              unknown(why);
              break;
            }
            if (ev.random) {
              unknown("recent list written after a statistic match in the same rule (not modelled)");
              break;
            }
            if (r.cmd == RecentUse::Cmd::Set) {
              if (reached) ev.fx.push_back(r);
              decide(true, r.neg);  // --set always finds (adds) the client
              break;
            }
            bool found = std::find(pkt.remembered.begin(), pkt.remembered.end(), r.list) != pkt.remembered.end() &&
                         (r.seconds == 0 || pkt.remembered_age < r.seconds);
            if (found && reached && r.cmd != RecentUse::Cmd::Rcheck) ev.fx.push_back(r);
            decide(found, r.neg);
          }
          break;
        }
        case ArgKind::Comment:
          break;
        case ArgKind::SPort:
          if (!pkt.sport) {
            unknown("source port of the packet not given (--sport)");
            break;
          }
          decide(*pkt.sport >= a.value && *pkt.sport <= a.value2, a.neg);
          break;
        case ArgKind::DPort:
          decide(e.dport >= a.value && e.dport <= a.value2, a.neg);
          break;
        case ArgKind::MultiPorts: {
          std::vector<std::pair<uint32_t, uint32_t>> ranges;
          if (!parse_port_list(a.text, &ranges)) {
            unknown("multiport list \"" + a.text + "\" not understood");
            break;
          }
          auto in = [&](uint32_t p) {
            for (auto [lo, hi] : ranges)
              if (p >= lo && p <= hi) return true;
            return false;
          };
          bool need_s = a.text2 != "--dports";
          if (need_s && !pkt.sport) {
            // --ports matches if either port is listed: a listed destination port decides it.
            if (a.text2 == "--ports" && in(e.dport)) {
              decide(true, a.neg);
              break;
            }
            unknown("source port of the packet not given (--sport)");
            break;
          }
          bool m = a.text2 == "--dports"   ? in(e.dport)
                   : a.text2 == "--sports" ? in(*pkt.sport)
                                           : (in(e.dport) || in(*pkt.sport));
          decide(m, a.neg);
          break;
        }
        case ArgKind::SrcType:
        case ArgKind::DstType: {
          bool limit = false;
          for (const auto& b : args)
            if (b.kind == ArgKind::LimitIfaceIn || b.kind == ArgKind::LimitIfaceOut) limit = true;
          if (limit) break;  // reported by the LimitIface arg
          const IPAddr& addr = a.kind == ArgKind::SrcType ? pkt.src : e.dst;
          if (t.is_local(addr)) {
            decide((a.value & kAddrLocal) != 0, a.neg);
          } else if ((a.value & ~kAddrLocal) == 0) {
            decide(false, a.neg);
          } else {
            unknown("address type of " + addr.str() + " other than LOCAL depends on the routing table");
          }
          break;
        }
        case ArgKind::LimitIfaceIn:
        case ArgKind::LimitIfaceOut:
          unknown("addrtype --limit-iface-in/out not modelled");
          break;
        case ArgKind::CtState: {
          uint32_t bits = e.ct;
          if (a.text2 == "--state") bits &= ~(ir::kCtSnat | ir::kCtDnat);
          decide((bits & a.value) != 0, a.neg);
          break;
        }
        case ArgKind::MarkMatch:
          decide((e.mark & a.value2) == a.value, a.neg);
          break;
        case ArgKind::StatMode:
          if (a.text != "random") unknown("statistic --mode " + a.text + " depends on a packet counter");
          break;
        case ArgKind::Probability: {
          Probability p = Probability::statistic_match(a.value);
          if (a.neg) p = p.complement();
          ev.p = ev.p * p;
          ev.random = true;
          break;
        }
        case ArgKind::StatEvery:
        case ArgKind::StatPacket:
          break;  // nth mode: reported by StatMode
        case ArgKind::RecentCmd:
        case ArgKind::RecentSeconds:
        case ArgKind::RecentReap:
        case ArgKind::RecentHitcount:
        case ArgKind::RecentRttl:
        case ArgKind::RecentName:
        case ArgKind::RecentMask:
        case ArgKind::RecentSide:
          break;  // evaluated with their module
        case ArgKind::NfacctName:
          break;  // counts, always matches
        case ArgKind::MatchSet: {
          if (!t.options_.ipsets) {
            unknown("ipset \"" + a.text + "\" contents not known");
            break;
          }
          auto value = [](const IPAddr& x) {
            ipset::u128 v = 0;
            for (size_t b = 0; b < (x.family == IPFamily::V4 ? 4u : 16u); ++b) v = (v << 8) | x.bytes[b];
            return v;
          };
          ipset::PacketFields pf{value(pkt.src), value(e.dst), pkt.src.family, pkt.proto, pkt.sport, e.dport};
          std::string why;
          auto m = ipset::match(*t.options_.ipsets, a.text, a.text2, pf, &why);
          if (!m)
            unknown(why);
          else
            decide(*m, a.neg);
          break;
        }
        case ArgKind::Physdev: {
          auto op = physdev_op(a.text2);
          if (!op) {
            unknown("physdev option " + a.text2 + " not modelled");
            break;
          }
          const Stage& s = e.plan[e.stage];
          // Bridge information exists only for packets that entered a bridge port.
          bool none = pkt.origin == Origin::Node || s.loopback;
          if (!none && !pkt.in_bridge_port) {
            unknown("bridge port the packet entered through not given (--in-bridge-port / --no-bridge-port)");
            break;
          }
          bool info = !none && !pkt.in_bridge_port->empty();
          // The out port: only bridged packets in FORWARD/POSTROUTING have one.
          bool out_hook = s.hook == Hook::Forward || s.hook == Hook::Postrouting;
          if (info && out_hook && physdev_reads_out(*op) && !pkt.out_bridge_port) {
            unknown("bridge port the packet is bridged to not given (--out-bridge-port / --routed)");
            break;
          }
          std::string in = info ? *pkt.in_bridge_port : std::string();
          std::string out = info && out_hook && pkt.out_bridge_port ? *pkt.out_bridge_port : std::string();
          if (physdev_test(*op, a.text, a.neg, info, in, out) == false) any_false = true;
          break;
        }
        case ArgKind::Unknown:
          unknown("option " + a.text2 + " not modelled");
          break;
      }
    }
    if (any_false)
      ev.tri = Tri::False;
    else if (!ev.why.empty())
      ev.tri = Tri::Unknown;
    else
      ev.tri = Tri::True;
    if (ev.tri == Tri::True && ev.random && ev.p.is_zero()) ev.tri = Tri::False;  // threshold 0 never matches
    if (ev.tri == Tri::False && fx_uncertain) {
      // The rule fails, but whether it wrote its recent list depends on an undecided test.
      ev.tri = Tri::Unknown;
      ev.fx.clear();
    }
    return ev;
  }

  // End of the current frame (fell off the end, or RETURN): back to the caller,
  // or the policy of the stage's built-in chain.
  Flow frame_done(Exec& e) {
    e.stack.pop_back();
    if (!e.stack.empty()) return Flow::Continue;
    const Chain* b = e.builtin;
    bool dropping = b->policy == "DROP";
    if ((!b->rules.empty() || dropping) && t.options_.record_paths) {
      Step s;
      s.kind = Step::Policy;
      s.table = e.plan[e.stage].table;
      s.chain = b->name;
      s.text = ":" + std::string(b->name) + " " + b->policy;
      s.note = "policy";
      e.path.push_back(std::move(s));
    }
    if (dropping) {
      finish(e, Verdict::Drop);
      return Flow::Finished;
    }
    return Flow::StageDone;
  }

  Flow apply_target(Exec& e, const ir::Rule& r) {
    const Stage& st = e.plan[e.stage];
    const ir::Target& tg = r.target;
    auto unknown = [&](std::string why) {
      if (!e.path.empty()) e.path.back().kind = Step::Unknown;
      finish(e, Verdict::Unknown, std::move(why));
      return Flow::Finished;
    };
    switch (tg.kind) {
      case TargetKind::None:
        return Flow::Continue;
      case TargetKind::Jump:
      case TargetKind::Goto: {
        const Chain* c = t.state_.find(st.table, tg.chain);
        if (!c) return unknown("jump to missing chain " + tg.chain);
        if (e.stack.size() >= t.options_.max_depth)
          return unknown("chain depth beyond " + std::to_string(t.options_.max_depth));
        if (tg.kind == TargetKind::Goto)
          e.stack.back() = Frame{c, 0};
        else
          e.stack.push_back(Frame{c, 0});
        return Flow::Continue;
      }
      case TargetKind::Accept:
        return Flow::StageDone;
      case TargetKind::Drop:
        finish(e, Verdict::Drop);
        return Flow::Finished;
      case TargetKind::Reject:
        if (st.hook != Hook::Input && st.hook != Hook::Forward && st.hook != Hook::Output)
          return unknown("REJECT outside INPUT/FORWARD/OUTPUT (the kernel refuses it)");
        append_effect(&e.options, target_options_text(tg, e.dst.family));
        finish(e, Verdict::Reject);
        return Flow::Finished;
      case TargetKind::Return:
        return frame_done(e);
      case TargetKind::DNAT: {
        if (st.table != TableId::Nat || (st.hook != Hook::Prerouting && st.hook != Hook::Output))
          return unknown("DNAT outside nat PREROUTING/OUTPUT (the kernel refuses it)");
        if (tg.to_port_lo != tg.to_port_hi) return unknown("DNAT to a port range: the port is chosen at run time");
        if (tg.to_port_zero) return unknown("DNAT to port 0: the port the kernel picks is not modelled");
        IPAddr nd = tg.to_addr ? *tg.to_addr : e.dst;
        if (nd.family != e.dst.family) return unknown("DNAT to an address of the other family");
        uint16_t np = tg.to_port_lo ? tg.to_port_lo : e.dport;
        if (nd != e.dst || np != e.dport) e.ct |= ir::kCtDnat;
        e.dst = nd;
        e.dport = np;
        e.dnat = true;
        append_effect(&e.options, target_options_text(tg, nd.family));
        return Flow::StageDone;
      }
      case TargetKind::SNAT:
        if (st.table != TableId::Nat || (st.hook != Hook::Postrouting && st.hook != Hook::Input))
          return unknown("SNAT outside nat POSTROUTING/INPUT (the kernel refuses it)");
        e.snat = snat_outcome_text(tg);
        e.ct |= ir::kCtSnat;
        return Flow::StageDone;
      case TargetKind::Masquerade:
        if (st.table != TableId::Nat || st.hook != Hook::Postrouting)
          return unknown("MASQUERADE outside nat POSTROUTING (the kernel refuses it)");
        e.masq = true;
        e.ct |= ir::kCtSnat;
        append_effect(&e.options, target_options_text(tg, e.dst.family));
        return Flow::StageDone;
      case TargetKind::Mark:
        e.mark = (e.mark & ~tg.mark_mask) ^ tg.mark_value;
        return Flow::Continue;
      case TargetKind::Other:
        if (is_noop_target(tg.chain)) return Flow::Continue;
        if (tg.chain == "CONNMARK") {
          ConnmarkOp op = read_connmark_target(tg);
          if (!op.why.empty()) return unknown(op.why);
          if (!has_ct(e)) return Flow::Continue;  // no conntrack entry: nothing to mark
          std::tie(e.ctv, e.ctk) = ct_mark(e);
          e.ct_init = true;
          switch (op.kind) {
            case ConnmarkOp::Kind::Set:
              e.ctv = (e.ctv & ~op.ctmask) ^ op.value;
              e.ctk |= op.ctmask;
              e.ct_written = true;
              break;
            case ConnmarkOp::Kind::Save:
              if (~op.ctmask & op.nfmask & ~e.ctk)
                return unknown("CONNMARK --save-mark mixes the packet mark with an unknown connection mark");
              e.ctv = (e.ctv & ~op.ctmask) ^ (e.mark & op.nfmask);
              e.ctk |= op.ctmask;
              e.ct_written = true;
              break;
            case ConnmarkOp::Kind::Restore:
              if (op.ctmask & ~e.ctk)
                return unknown("CONNMARK --restore-mark: the connection's mark is not known (a first packet's is 0; "
                               "give --ctmark)");
              e.mark = (e.mark & ~op.nfmask) ^ (e.ctv & op.ctmask);
              break;
          }
          return Flow::Continue;
        }
        if (CtTarget ct = ct_target(tg); ct != CtTarget::NotCt) {
          if (ct == CtTarget::Unmodelled) return unknown("target " + tg.chain + " (options other than --notrack) not modelled");
          if (st.table != TableId::Raw) return unknown("target " + tg.chain + " outside the raw table (the kernel refuses it)");
          if (st.loopback || e.notrack) return Flow::Continue;  // conntrack already attached
          e.notrack = true;
          e.ct = ir::kCtUntracked;
          append_effect(&e.options, "notrack");
          return Flow::Continue;
        }
        return unknown("target " + tg.chain + " not modelled");
    }
    return Flow::Continue;
  }

  void run(Exec e) {
    if (truncating) {
      truncated = truncated + e.prob;
      return;
    }
    for (;;) {
      if (e.stack.empty()) {
        if (e.stage >= e.plan.size()) {
          finish(e, Verdict::Accept);
          return;
        }
        const Stage& s = e.plan[e.stage];
        if (s.kind == Stage::Route) {
          route(e);
          ++e.stage;
          continue;
        }
        const TableState& tb = table(s.table);
        bool skip = !tb.present;
        if (s.table == TableId::Nat && !(e.ct & ir::kCtNew)) skip = true;  // nat: first packet only
        const Chain* b = skip ? nullptr : t.state_.find(s.table, hook_chain(s.hook));
        if (!b) {
          ++e.stage;
          continue;
        }
        e.builtin = b;
        e.stack.push_back(Frame{b, 0});
      }
      Frame& f = e.stack.back();
      if (!f.indexed) {
        f.indexed = true;
        f.index = t.chain_index(e.plan[e.stage].table, *f.chain);
      }
      if (f.index && f.next < f.chain->rules.size()) f.next = f.index->next(f.next, e.dst, pkt.proto, e.dport);
      if (f.next >= f.chain->rules.size()) {
        Flow fl = frame_done(e);
        if (fl == Flow::Finished) return;
        if (fl == Flow::StageDone) {
          e.stack.clear();
          ++e.stage;
        }
        continue;
      }
      uint32_t id = f.chain->rules[f.next++];
      if (t.excluded_by_addresses(id, pkt.src, e.dst)) continue;
      TableId tid = e.plan[e.stage].table;
      const ir::Rule* r = t.rule(tid, f.chain->name, id);
      if (!r) {
        add_step(e, Step::Unknown, f, id);
        finish(e, Verdict::Unknown, "rule text does not re-parse");
        return;
      }
      Eval ev = evaluate(*r, e);
      e.affinity.insert(e.affinity.end(), ev.fx.begin(), ev.fx.end());
      if (ev.tri == Tri::False) continue;
      if (ev.tri == Tri::Unknown) {
        add_step(e, Step::Unknown, f, id);
        finish(e, Verdict::Unknown, ev.why);
        return;
      }
      if (ev.random && !ev.p.is_one()) {
        // Both branches: the rule matches with probability p, misses with 1 - p.
        Exec m = e;
        m.prob = m.prob * ev.p;
        add_step(m, Step::Rule, m.stack.back(), id,
                 [&] { return "statistic: matched, p = " + ev.p.fraction() + " ~ " + ev.p.decimal(10); });
        step_target(std::move(m), *r);
        Probability miss = ev.p.complement();
        e.prob = e.prob * miss;
        add_step(e, Step::NotTaken, e.stack.back(), id,
                 [&] { return "statistic: not matched, p = " + miss.fraction() + " ~ " + miss.decimal(10); });
        if (e.prob.is_zero()) return;
        continue;
      }
      add_step(e, Step::Rule, f, id);
      Flow fl = apply_target(e, *r);
      if (fl == Flow::Finished) return;
      if (fl == Flow::StageDone) {
        e.stack.clear();
        ++e.stage;
      }
    }
  }

  void step_target(Exec e, const ir::Rule& r) {
    if (e.prob.is_zero()) return;
    Flow fl = apply_target(e, r);
    if (fl == Flow::Finished) return;
    if (fl == Flow::StageDone) {
      e.stack.clear();
      ++e.stage;
    }
    run(std::move(e));
  }
};

Tracer::Tracer(const RulesetState& state, TraceOptions options) : state_(state), options_(std::move(options)) {
  locals_ = options_.local_addresses;
  std::sort(locals_.begin(), locals_.end());
  locals_.erase(std::unique(locals_.begin(), locals_.end()), locals_.end());
}
Tracer::~Tracer() = default;

bool Tracer::is_local(const IPAddr& a) const {
  if (a.family == IPFamily::V4 && a.bytes[0] == 127) return true;
  if (a.is_loopback()) return true;
  // The IPVS tracer gives every address bound on kube-ipvs0 (one per Service): a binary search.
  return std::binary_search(locals_.begin(), locals_.end(), a);
}

const ir::Rule* Tracer::rule(TableId t, std::string_view chain, uint32_t id) {
  uint64_t key = (uint64_t(static_cast<uint8_t>(t)) << 32) | id;
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second.get();
  if (bad_.count(key)) return nullptr;
  std::string text = "-A " + std::string(chain) + std::string(state_.store->text(id));
  ParseOptions po;
  po.family = state_.family;
  po.table = t;
  auto words = split_words(text);
  LineParse lp = parse_command(words, po, 1);
  if (lp.error || !lp.op || lp.op->kind != ir::OpKind::Append) {
    bad_[key] = true;
    return nullptr;
  }
  auto p = std::make_unique<ir::Rule>(std::move(lp.op->rule));
  const ir::Rule* raw = p.get();
  cache_.emplace(key, std::move(p));
  return raw;
}

const std::string& Tracer::rule_service(TableId t, std::string_view chain, uint32_t id) {
  uint64_t key = (uint64_t(static_cast<uint8_t>(t)) << 32) | id;
  auto it = services_.find(key);
  if (it != services_.end()) return it->second;
  std::string comment;
  if (const ir::Rule* r = rule(t, chain, id))
    for (const auto& a : r->args)
      if (a.kind == ArgKind::Comment) comment = a.text;
  return services_.emplace(key, comment.empty() ? std::string() : service_from_comment(comment)).first->second;
}

bool Tracer::excluded_by_addresses(uint32_t id, const IPAddr& src, const IPAddr& dst) {
  if (id >= quick_.size()) quick_.resize(state_.store->size());
  Quick& q = quick_[id];
  if (!q.read) {
    q.read = true;
    // iptables-save prints "[!] -s A/len [!] -d A/len" first.
    std::string_view t = state_.store->text(id);
    bool neg = false;
    size_t i = 0;
    auto word = [&]() {
      while (i < t.size() && t[i] == ' ') ++i;
      size_t b = i;
      while (i < t.size() && t[i] != ' ') ++i;
      return t.substr(b, i - b);
    };
    for (int n = 0; n < 6; ++n) {
      std::string_view w = word();
      if (w == "!") {
        neg = true;
        continue;
      }
      if (w != "-s" && w != "-d") break;
      auto c = CIDR::parse(word(), false, nullptr, true);
      if (!c) break;
      if (w == "-s")
        q.has_s = true, q.neg_s = neg, q.s = *c;
      else
        q.has_d = true, q.neg_d = neg, q.d = *c;
      neg = false;
    }
  }
  if (q.has_s && q.s.contains(src) == q.neg_s) return true;
  if (q.has_d && q.d.contains(dst) == q.neg_d) return true;
  return false;
}

TraceResult Tracer::trace(const Packet& packet) {
  Impl im(*this, packet);
  Exec e;
  e.dst = packet.dst;
  e.dport = packet.dport;
  e.mark = packet.mark;
  e.ct = packet.ctstate;
  auto add = [&](TableId tb, Hook h) {
    Stage s;
    s.table = tb;
    s.hook = h;
    e.plan.push_back(s);
  };
  if (packet.origin == Origin::Node) {
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
  Stage r;
  r.kind = Stage::Route;
  e.plan.push_back(r);
  if (!(packet.ctstate & ir::kCtNew))
    im.result.notes.push_back(
        "conntrack state is not NEW: the nat table is not consulted; addresses are taken as given");
  im.run(std::move(e));
  if (!im.truncated.is_zero()) {
    Outcome o;
    o.probability = im.truncated;
    o.verdict = Verdict::Unknown;
    o.unknown_reason = "more than " + std::to_string(options_.max_outcomes) + " outcomes: the rest was not traced";
    im.result.outcomes.push_back(std::move(o));
  }
  return std::move(im.result);
}

TraceResult trace_stages(Tracer& tracer, const Packet& packet, const std::vector<StageSpec>& stages,
                         const StageStart& start) {
  Tracer::Impl im(tracer, packet);
  Exec e;
  e.dst = start.dst;
  e.dport = start.dport;
  e.mark = start.mark;
  e.ct = start.ctstate;
  e.dnat = start.dnat;
  e.masq = start.masquerade;
  e.route = start.route;
  e.ipvs_known = true;
  e.ipvs = start.ipvs;
  for (const auto& sp : stages) {
    Stage st;
    st.table = sp.table;
    bool found = false;
    for (Hook h : {Hook::Prerouting, Hook::Input, Hook::Forward, Hook::Output, Hook::Postrouting})
      if (sp.chain == hook_chain(h)) st.hook = h, found = true;
    if (!found) continue;  // not a hook: nothing runs there
    e.plan.push_back(st);
  }
  im.run(std::move(e));
  if (!im.truncated.is_zero()) {
    Outcome o;
    o.probability = im.truncated;
    o.verdict = Verdict::Unknown;
    o.unknown_reason = "more than " + std::to_string(tracer.options().max_outcomes) + " outcomes: the rest was not traced";
    im.result.outcomes.push_back(std::move(o));
  }
  return std::move(im.result);
}

// ------------------------------------------------------------------ reports

std::vector<DistributionEntry> distribution(const TraceResult& r) {
  std::vector<DistributionEntry> out;
  for (const auto& o : r.outcomes) {
    auto it = std::find_if(out.begin(), out.end(), [&](const DistributionEntry& d) {
      return d.verdict == o.verdict && d.dnat_text == o.dnat_text && d.masquerade == o.masquerade &&
             d.unknown_reason == o.unknown_reason;
    });
    if (it == out.end()) {
      DistributionEntry d;
      d.verdict = o.verdict;
      d.dnat_text = o.dnat_text;
      d.masquerade = o.masquerade;
      d.unknown_reason = o.unknown_reason;
      out.push_back(d);
      it = out.end() - 1;
    }
    it->probability = it->probability + o.probability;
    it->outcomes += 1;
  }
  std::stable_sort(out.begin(), out.end(), [](const DistributionEntry& a, const DistributionEntry& b) {
    return a.probability > b.probability;
  });
  return out;
}

namespace {
std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

std::string show_fraction(const Probability& p) {
  if (p.denominator_log2() <= 128) return p.fraction();
  std::string n = p.numerator().str();
  if (n.size() > 60) n = n.substr(0, 20) + "...(" + std::to_string(n.size()) + " digits)";
  return n + "/2^" + std::to_string(p.denominator_log2());
}
}  // namespace

std::string format_text(const Packet& pkt, const TraceOptions& options, const TraceResult& r) {
  std::string out;
  out += "packet: ";
  out += proto_name(pkt.proto);
  out += " " + (pkt.src.family == IPFamily::V6 ? "[" + pkt.src.str() + "]" : pkt.src.str()) + ":" +
         (pkt.sport ? std::to_string(*pkt.sport) : std::string("*"));
  out += " -> " + host_port(pkt.dst, pkt.dport);
  out += ", from ";
  out += origin_name(pkt.origin);
  if (pkt.origin != Origin::Node) out += " (in " + (pkt.in_iface ? printable(*pkt.in_iface) : std::string("?")) + ")";
  if (pkt.out_iface) out += ", out " + printable(*pkt.out_iface);
  if (pkt.origin != Origin::Node && pkt.in_bridge_port) {
    if (pkt.in_bridge_port->empty())
      out += ", not through a bridge port";
    else {
      out += ", bridge port in " + printable(*pkt.in_bridge_port);
      if (pkt.out_bridge_port)
        out += pkt.out_bridge_port->empty() ? " (routed)" : ", bridged to " + printable(*pkt.out_bridge_port);
    }
  }
  out += ", ct " + ir::ctstate_text(pkt.ctstate) + ", mark " + hex(pkt.mark);
  if (pkt.remembered.empty())
    out += ", new client";
  else {
    out += ", client remembered by";
    for (const auto& n : pkt.remembered) out += " " + printable(n);
    out += " (last seen " + std::to_string(pkt.remembered_age) + " s ago)";
  }
  out += "\nlocal addresses:";
  for (const auto& a : options.local_addresses) out += " " + a.str();
  out += pkt.dst.family == IPFamily::V4 ? " (and 127.0.0.0/8)\n" : " (and ::1)\n";
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  out += std::to_string(r.outcomes.size()) + (r.outcomes.size() == 1 ? " outcome\n" : " outcomes\n");
  size_t k = 0;
  for (const auto& o : r.outcomes) {
    ++k;
    out += "\n[" + std::to_string(k) + "] p = " + show_fraction(o.probability) + " ~ " + o.probability.decimal(10) +
           "  " + verdict_name(o.verdict);
    if (!o.route.empty()) out += " (" + o.route + ")";
    if (o.dnat) out += "  DNAT " + o.dnat_text;
    out += std::string("  masquerade: ") + (o.masquerade ? "yes" : "no");
    if (!o.snat_text.empty()) out += "  SNAT " + o.snat_text;
    out += "  mark " + hex(o.final_mark);
    if (!o.options.empty()) out += "  [" + printable(o.options) + "]";
    if (!o.affinity.empty())
      out += "  affinity: " + printable(affinity_text(o.affinity, [](const std::string& l) { return l; }));
    if (!o.services.empty()) {
      out += "  service";
      for (const auto& s : o.services) out += " " + printable(s);
    }
    out += "\n";
    if (o.verdict == Verdict::Unknown) out += "    unknown: " + printable(o.unknown_reason) + "\n";
    for (const auto& s : o.path) {
      char head[96];
      std::snprintf(head, sizeof head, "    %-8s %-28s ", ir::table_name(s.table), printable(s.chain).c_str());
      out += head;
      if (s.kind == Step::Policy)
        out += "policy ";
      else
        out += "#" + std::to_string(s.rule_no) + " ";
      out += printable(s.text);
      if (s.kind == Step::NotTaken) out += "   [not taken]";
      if (s.kind == Step::Unknown) out += "   [unknown]";
      if (!s.note.empty() && s.kind != Step::Policy) out += "   (" + printable(s.note) + ")";
      out += "\n";
    }
  }
  auto dist = distribution(r);
  if (dist.size() > 1 || (dist.size() == 1 && dist[0].outcomes > 1)) {
    out += "\ndistribution:\n";
    for (const auto& d : dist) {
      out += "  " + d.probability.decimal(10) + "  " + show_fraction(d.probability) + "  " + verdict_name(d.verdict);
      if (!d.dnat_text.empty()) out += " DNAT " + d.dnat_text;
      if (d.masquerade) out += " masquerade";
      if (!d.unknown_reason.empty()) out += " (" + printable(d.unknown_reason) + ")";
      out += "\n";
    }
  }
  Probability total = r.total();
  if (!total.is_one()) out += "total probability " + show_fraction(total) + " (not 1)\n";
  return out;
}

namespace {
// The "ip:port" a KUBE-SEP rule DNATs to (its --to-destination), if it has one.
std::optional<std::string_view> dnat_destination(std::string_view rule) {
  size_t p = rule.find(" --to-destination ");
  if (p == std::string_view::npos) return std::nullopt;
  size_t b = p + 18, e = rule.find(' ', b);
  return rule.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
}
}  // namespace

std::vector<std::string> resolve_affinity(const RulesetState& state, const std::string& endpoint) {
  std::vector<std::string> out;
  const TableState& nat = state.table(TableId::Nat);
  if (starts_with(endpoint, "KUBE-SEP-") || state.find(TableId::Nat, endpoint)) {
    out.push_back(endpoint);
    return out;
  }
  // "ip:port" or "[v6]:port": SEP chains whose DNAT goes there.
  std::string want = endpoint;
  std::vector<std::string> names;
  for (const Chain& chain : nat.chains) {
    const std::string name(chain.name);
    if (!starts_with(name, "KUBE-SEP-")) continue;
    for (uint32_t id : chain.rules)
      if (auto to = dnat_destination(state.store->text(id)); to && *to == want) {
        names.push_back(name);
        break;
      }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::unordered_map<std::string, std::vector<std::string>> affinity_index(const RulesetState& state) {
  std::unordered_map<std::string, std::vector<std::string>> out;
  for (const Chain& chain : state.table(TableId::Nat).chains) {
    const std::string name(chain.name);
    if (!starts_with(name, "KUBE-SEP-")) continue;
    for (uint32_t id : chain.rules) {
      auto to = dnat_destination(state.store->text(id));
      if (!to) continue;
      auto& names = out[std::string(*to)];
      if (names.empty() || names.back() != name) names.push_back(name);
    }
  }
  for (auto& [endpoint, names] : out) {
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
  }
  return out;
}

const std::vector<KubeProxyJump>& kube_proxy_jumps() {
  // Reference notes kubeproxy-iptables.md, section 3, in list order.
  static const std::vector<KubeProxyJump> kJumps = {
      {TableId::Filter, "INPUT", "KUBE-EXTERNAL-SERVICES",
       "-m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\""},
      {TableId::Filter, "FORWARD", "KUBE-EXTERNAL-SERVICES",
       "-m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\""},
      {TableId::Filter, "INPUT", "KUBE-NODEPORTS", "-m comment --comment \"kubernetes health check service ports\""},
      {TableId::Filter, "FORWARD", "KUBE-SERVICES",
       "-m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\""},
      {TableId::Filter, "OUTPUT", "KUBE-SERVICES",
       "-m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\""},
      {TableId::Filter, "FORWARD", "KUBE-FORWARD", "-m comment --comment \"kubernetes forwarding rules\""},
      {TableId::Filter, "INPUT", "KUBE-PROXY-FIREWALL",
       "-m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\""},
      {TableId::Filter, "OUTPUT", "KUBE-PROXY-FIREWALL",
       "-m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\""},
      {TableId::Filter, "FORWARD", "KUBE-PROXY-FIREWALL",
       "-m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\""},
      {TableId::Nat, "OUTPUT", "KUBE-SERVICES", "-m comment --comment \"kubernetes service portals\""},
      {TableId::Nat, "PREROUTING", "KUBE-SERVICES", "-m comment --comment \"kubernetes service portals\""},
      {TableId::Nat, "POSTROUTING", "KUBE-POSTROUTING", "-m comment --comment \"kubernetes postrouting rules\""},
      {TableId::Filter, "INPUT", "KUBE-FIREWALL", ""},
      {TableId::Filter, "OUTPUT", "KUBE-FIREWALL", ""},
  };
  return kJumps;
}

std::string KubeProxyJump::rule_text() const { return std::string(args) + (*args ? " " : "") + "-j " + to; }

bool add_kube_proxy_jumps(RulesetState& state, std::string* error) {
  // In list order: ensure the target chain exists, then insert the rule at the top
  // unless an identical one is there.
  std::string blocks[2];  // filter, nat
  std::set<std::string> created[2];
  for (const auto& j : kube_proxy_jumps()) {
    int k = j.table == TableId::Nat;
    std::string& b = blocks[k];
    if (!state.find(j.table, j.to) && created[k].insert(j.to).second) b += std::string("-N ") + j.to + "\n";
    std::string args = j.rule_text();
    auto rule = parse_rule_text("-A " + std::string(j.from) + " " + args, state.family);
    if (!rule) {
      if (error) *error = "cannot read " + args;
      return false;
    }
    uint32_t id = state.store->intern(*rule, state.family);
    const Chain* c = state.find(j.table, j.from);
    if (c && std::find(c->rules.begin(), c->rules.end(), id) != c->rules.end()) continue;
    b += "-I " + std::string(j.from) + " 1 " + args + "\n";
  }
  std::string prog;
  if (!blocks[0].empty()) prog += "*filter\n" + blocks[0] + "COMMIT\n";
  if (!blocks[1].empty()) prog += "*nat\n" + blocks[1] + "COMMIT\n";
  if (prog.empty()) return true;
  ParseError pe;
  ApplyOptions ao{true, Flavor::Legacy};
  ao.discard_on_failure = true;  // no copy of a 130k-chain nat table for a dozen rules
  auto r = apply_text(state, prog, ao, &pe);
  if (!r.ok() && error) *error = "line " + std::to_string(r.error->line) + ": " + r.error->reason;
  return r.ok();
}

bool builtin_chains_empty(const RulesetState& state) {
  for (TableId t : {TableId::Nat, TableId::Filter}) {
    for (const auto& name : ir::builtin_chains(t))
      if (const Chain* c = state.find(t, name); c && !c->rules.empty()) return false;
  }
  return true;
}

}  // namespace kpc::verifier::trace
