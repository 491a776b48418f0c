#include "verifier/nft_trace/tracer.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "compiler/ir/rule.h"
#include "compiler/support/text.h"
#include "verifier/nft/internal.h"

namespace kpc::verifier::nft_trace {
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
// Which NAT binding a hook's nat chains make (nf_nat_inet_fn): destination before
// routing, source after; forward has none.
enum class Manip : uint8_t { Dst, Src, None };
Manip manip_of(Hook h) {
  if (h == Hook::Prerouting || h == Hook::Output) return Manip::Dst;
  if (h == Hook::Input || h == Hook::Postrouting) return Manip::Src;
  return Manip::None;
}

struct Stage {
  enum Kind : uint8_t { Chain, Route } kind = Chain;
  Hook hook = Hook::Prerouting;
  const nft::Table* table = nullptr;
  const nft::Chain* chain = nullptr;
  bool loopback = false;  ///< node -> local: the packet comes back in on lo
};

struct Frame {
  const nft::Chain* chain = nullptr;
  size_t next = 0;  ///< index of the next rule
};

enum class Tri : uint8_t { False, True, Unknown };

// A path longer than this is a loop the state let through (the nft model refuses jump and
// goto cycles, but a state built otherwise may hold one): Unknown, never an endless trace.
constexpr size_t kMaxRulesPerPath = 100000;
constexpr int kConntrackPriority = -200;  // NF_IP_PRI_CONNTRACK
enum class Flow : uint8_t { NextRule, Continue, StageDone, Finished };

struct Exec {
  std::optional<IPAddr> src;  ///< unset after masquerade (the interface's address)
  IPAddr dst;
  uint16_t dport = 0;
  uint32_t mark = 0;
  uint32_t ct = 0;
  bool dnat = false, masq = false;
  std::string snat, options;
  std::vector<std::string> affinity;
  std::set<std::pair<std::string, std::string>> updated;  ///< (set, key text) this packet added
  Fraction prob;
  std::vector<Step> path;
  std::vector<std::string> services;  ///< without paths (TraceOptions::record_paths): named so far
  /// Services named by the comments of map elements the packet matched (kube-proxy's
  /// no-endpoint-services elements carry "ns/name:port"): a REJECT there names its Service.
  std::vector<std::string> element_services;
  std::vector<Stage> plan;
  size_t stage = 0;
  std::vector<Frame> stack;
  std::string route;
  bool bound_dst = false, bound_src = false;
  std::optional<Hook> last_hook;
  // The rule being executed.
  const nft::Rule* rule = nullptr;
  const RuleModel* model = nullptr;
  size_t rule_no = 0, stmt = 0;
  bool step_recorded = false;
  std::optional<uint32_t> numgen;
  std::string note;
  size_t evaluated = 0;  ///< rules read on this path (a goto cycle never grows the stack)
};

const char* proto_canonical(uint64_t p) {
  switch (p) {
    case 6: return "tcp";
    case 17: return "udp";
    case 132: return "sctp";
    case 1: return "icmp";
    case 136: return "udplite";
  }
  return nullptr;
}

bool family_sees(nft::Family f, IPFamily pkt) {
  return f == nft::Family::Inet || (pkt == IPFamily::V4 ? f == nft::Family::Ip : f == nft::Family::Ip6);
}

}  // namespace

Fraction TraceResult::total() const {
  Fraction t = Fraction::zero();
  for (const auto& o : outcomes) t = t + o.probability;
  return t;
}

struct Tracer::Impl {
  Tracer& t;
  const Packet& pkt;
  TraceResult result;
  Fraction truncated = Fraction::zero();
  bool truncating = false;
  bool v4;
  // Parsed elements of sets, by set (interval sets and sets read by a scan).
  std::unordered_map<const nft::Set*, std::vector<std::optional<std::vector<Range>>>> ranges;

  Impl(Tracer& tr, const Packet& p) : t(tr), pkt(p), v4(p.dst.family == IPFamily::V4) {}

  // ---------------------------------------------------------------- plan

  std::vector<Stage> hook_stages(Hook h, bool loopback) const {
    std::vector<Stage> out;
    for (const auto& [tb, c] : t.base_chains()) {
      if (!family_sees(tb->family, pkt.dst.family) || c->hook != hook_name(h)) continue;
      Stage s;
      s.hook = h;
      s.table = tb;
      s.chain = c;
      s.loopback = loopback;
      out.push_back(s);
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const Stage& a, const Stage& b) { return a.chain->priority < b.chain->priority; });
    return out;
  }

  void append(Exec& e, Hook h, bool loopback = false) {
    auto s = hook_stages(h, loopback);
    e.plan.insert(e.plan.end(), s.begin(), s.end());
  }

  void route(Exec& e) {
    bool local = t.is_local(e.dst);
    if (pkt.origin == Origin::Node) {
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

  Step make_step(const Exec& e, Step::Kind kind) const {
    Step s;
    s.kind = kind;
    const Stage& st = e.plan[e.stage];
    s.table = std::string(nft::family_name(st.table->family)) + " " + st.table->name;
    s.hook = hook_name(st.hook);
    if (!e.stack.empty()) s.chain = e.stack.back().chain->name;
    if (e.rule) {
      s.rule_no = static_cast<uint32_t>(e.rule_no);
      s.handle = e.rule->handle;
      s.text = e.rule->canonical();
      if (e.model) s.comment = e.model->comment;
    }
    s.note = e.note;
    return s;
  }

  // Without paths: the services a step would name (its chain's, then its comment's), in the
  // order finish reads them from the path.
  void name_services(Exec& e, const std::string& chain, const std::string& comment) {
    for (const std::string& svc : {service_from_chain(chain), trace::service_from_comment(comment)})
      if (!svc.empty() && std::find(e.services.begin(), e.services.end(), svc) == e.services.end())
        e.services.push_back(svc);
  }
  void push_step(Exec& e, Step::Kind kind) {
    if (t.options_.record_paths) {
      e.path.push_back(make_step(e, kind));
      return;
    }
    static const std::string none;
    name_services(e, e.stack.empty() ? none : e.stack.back().chain->name,
                  e.rule && e.model ? e.model->comment : none);
  }

  void record_step(Exec& e) {
    if (e.step_recorded || !e.rule) return;
    e.step_recorded = true;
    push_step(e, Step::Rule);
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
      o.dnat_text = trace::host_port(e.dst, e.dport);
    }
    o.masquerade = e.masq;
    o.snat_text = e.snat;
    o.final_mark = e.mark;
    o.options = e.options;
    o.affinity = e.affinity;
    o.unknown_reason = std::move(reason);
    for (const auto& s : e.path) {
      for (const std::string& svc : {service_from_chain(s.chain), trace::service_from_comment(s.comment)})
        if (!svc.empty() && std::find(o.services.begin(), o.services.end(), svc) == o.services.end())
          o.services.push_back(svc);
    }
    if (!t.options_.record_paths) o.services = std::move(e.services);
    for (const auto& svc : e.element_services)
      if (std::find(o.services.begin(), o.services.end(), svc) == o.services.end()) o.services.push_back(svc);
    o.path = std::move(e.path);
    result.outcomes.push_back(std::move(o));
  }

  void unknown(Exec& e, std::string why) {
    if (e.rule) {
      push_step(e, Step::Unknown);
      e.step_recorded = true;
    }
    finish(e, Verdict::Unknown, std::move(why));
  }

  // ---------------------------------------------------------------- fields

  enum class Got : uint8_t { Value, Absent, Unknown };

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

  Got field(const Exec& e, const Key& k, Field f, Value* v, std::string* why) const {
    switch (f) {
      case Field::IpSaddr:
        if (!e.src) return *why = "the source address after masquerade is the interface's", Got::Unknown;
        v->addr = *e.src;
        return Got::Value;
      case Field::IpDaddr:
        v->addr = e.dst;
        return Got::Value;
      case Field::L4proto:
        v->num = pkt.proto;
        return Got::Value;
      case Field::ThDport:
        v->num = e.dport;
        return Got::Value;
      case Field::ThSport:
        if (!pkt.sport) return *why = "source port not given (--sport)", Got::Unknown;
        v->num = *pkt.sport;
        return Got::Value;
      case Field::Mark:
        v->num = k.mark_mask ? (e.mark & *k.mark_mask) : e.mark;
        return Got::Value;
      case Field::Iifname:
      case Field::Iif:
      case Field::Oifname:
      case Field::Oif: {
        bool in = f == Field::Iifname || f == Field::Iif;
        auto i = in ? in_iface(e) : out_iface(e);
        if (!i) return *why = std::string(in ? "input" : "output") + " interface not given", Got::Unknown;
        // No device at this hook: a name reads as "", an index breaks the rule (nft_meta).
        if (i->empty() && (f == Field::Iif || f == Field::Oif)) return Got::Absent;
        v->str = *i;
        return Got::Value;
      }
      case Field::FibSaddrType:
      case Field::FibDaddrType: {
        std::optional<IPAddr> a = f == Field::FibSaddrType ? e.src : std::optional<IPAddr>(e.dst);
        if (!a) return *why = "the source address after masquerade is the interface's", Got::Unknown;
        v->str = t.is_local(*a) ? "local" : "";  // "": not local; its other type is not modelled
        return Got::Value;
      }
      case Field::Numgen:
        if (!e.numgen) return *why = "numgen outside the modelled places", Got::Unknown;
        v->num = *e.numgen;
        return Got::Value;
      case Field::CtState:
      case Field::CtStatus: {
        // Conntrack attaches at priority -200 in prerouting and output: a chain before it sees
        // no conntrack entry (ct state reads "invalid", other ct keys break the rule); one at
        // -200 exactly runs before or after it by registration order. A packet coming back in
        // on lo still carries the entry of its way out.
        const Stage& st = e.plan[e.stage];
        if ((st.hook == Hook::Prerouting && !st.loopback) || st.hook == Hook::Output) {
          int prio = st.chain->priority;
          if (prio == kConntrackPriority)
            return *why = "a chain at priority -200 runs before or after conntrack", Got::Unknown;
          if (prio < kConntrackPriority) {
            if (f == Field::CtStatus) return Got::Absent;
            v->num = ir::kCtInvalid;
            return Got::Value;
          }
        }
        v->num = e.ct;
        return Got::Value;
      }
    }
    return Got::Unknown;
  }

  // The key's values; False (Absent: the rule breaks), Unknown (why set), or True.
  Tri values(const Exec& e, const Key& k, std::vector<Value>* out, std::string* why) const {
    if (k.implied_proto && pkt.proto != *k.implied_proto) return Tri::False;
    out->clear();
    for (Field f : k.fields) {
      Value v;
      Got g = field(e, k, f, &v, why);
      if (g == Got::Absent) return Tri::False;
      if (g == Got::Unknown) return Tri::Unknown;
      out->push_back(std::move(v));
    }
    return Tri::True;
  }

  // Does an element (ranges) hold the values? Fib fields of a non-local address: Unknown
  // unless the element asks for "local" only.
  Tri holds(const Key& k, const std::vector<Value>& vals, const std::vector<Range>& el, std::string* why) const {
    if (el.size() != vals.size()) return *why = "element width differs from the key", Tri::Unknown;
    for (size_t i = 0; i < vals.size(); ++i) {
      Field f = k.fields[i];
      if ((f == Field::FibSaddrType || f == Field::FibDaddrType) && vals[i].str.empty()) {
        if (el[i].lo.str == "local") return Tri::False;
        return *why = "fib type " + el[i].lo.str + " of an address that is not local is not modelled", Tri::Unknown;
      }
      if (!in_range(f, vals[i], el[i])) return Tri::False;
    }
    return Tri::True;
  }

  // ---------------------------------------------------------------- sets

  const nft::Set* find_set(const Exec& e, const std::string& name) const {
    return e.plan[e.stage].table->find_set(name);
  }

  bool is_dynamic(const Exec& e, const nft::Set& s) {
    if (s.has_flag("dynamic")) return true;
    const nft::Table* tb = e.plan[e.stage].table;
    auto it = t.dynsets_.find(tb);
    if (it == t.dynsets_.end()) {
      std::set<std::string> names;
      for (const auto& c : tb->chains)
        for (const auto& r : c.rules)
          for (const auto& n : r.refs().dynset) names.insert(n);
      it = t.dynsets_.emplace(tb, std::move(names)).first;
    }
    return it->second.count(s.name) > 0;
  }

  // The canonical key text of the values, for an exact look-up (false: scan instead): each
  // value written out and put through the model's own canonical form for the set's key type,
  // so that the look-up compares what the model stored.
  bool canonical_key(const nft::Set& s, const Key& k, const std::vector<Value>& vals,
                     std::vector<std::string>* out) const {
    out->clear();
    for (size_t i = 0; i < vals.size(); ++i) {
      std::string text;
      switch (k.fields[i]) {
        case Field::IpSaddr:
        case Field::IpDaddr: text = vals[i].addr.str(); break;
        case Field::L4proto: {
          const char* n = proto_canonical(vals[i].num);
          if (!n) return false;
          text = n;
          break;
        }
        case Field::ThDport:
        case Field::ThSport:
        case Field::Numgen:
        case Field::Mark: text = std::to_string(vals[i].num); break;
        case Field::Iifname:
        case Field::Oifname: text = vals[i].str; break;
        default: return false;
      }
      std::string canon, bytes;
      if (!nft::detail::canonical_value(s.key[i], text, &canon, &bytes)) return false;
      out->push_back(std::move(canon));
    }
    return true;
  }

  // The element of set s that holds the values: found (el set), not found, or Unknown.
  Tri lookup(const Exec& e, const nft::Set& s, const Key& k, const std::vector<Value>& vals,
             const nft::Element** el, std::string* why) {
    *el = nullptr;
    if (s.key.size() != k.fields.size()) return *why = "@" + s.name + ": key width differs", Tri::Unknown;
    std::vector<std::string> ck;
    if (!s.has_flag("interval") && canonical_key(s, k, vals, &ck)) {
      *el = s.find_element(ck);
      if (*el && (*el)->removed) *el = nullptr;
      return *el ? Tri::True : Tri::False;
    }
    auto it = ranges.find(&s);
    if (it == ranges.end()) {
      std::vector<std::optional<std::vector<Range>>> rs;
      for (const auto& x : s.elements) {
        std::vector<Range> r;
        bool ok = !x.removed && x.key.size() == k.fields.size();
        for (size_t i = 0; ok && i < x.key.size(); ++i) {
          Range one;
          ok = read_range(k.fields[i], x.key[i], v4, &one);
          r.push_back(one);
        }
        rs.push_back(ok ? std::optional(r) : std::nullopt);
      }
      it = ranges.emplace(&s, std::move(rs)).first;
    }
    bool unknown = false;
    for (size_t i = 0; i < s.elements.size(); ++i) {
      if (s.elements[i].removed) continue;
      const auto& r = it->second[i];
      if (!r) {
        unknown = true;
        *why = "@" + s.name + ": element not modelled";
        continue;
      }
      std::string w;
      Tri h = holds(k, vals, *r, &w);
      if (h == Tri::True) {
        *el = &s.elements[i];
        return Tri::True;
      }
      if (h == Tri::Unknown) unknown = true, *why = w;
    }
    return unknown ? Tri::Unknown : Tri::False;
  }

  // Is the packet's key in @name (a set lookup)? Affinity sets also hold the client when
  // the client model says so.
  Tri in_set(Exec& e, const std::string& name, const Key& k, const std::vector<Value>& vals, std::string* why) {
    const nft::Set* s = find_set(e, name);
    if (!s) return *why = "set @" + name + " does not exist", Tri::Unknown;
    const nft::Element* el = nullptr;
    Tri r = lookup(e, *s, k, vals, &el, why);
    if (r != Tri::False) return r;
    if (e.updated.count({name, k.text})) return Tri::True;
    if (is_dynamic(e, *s) && std::find(pkt.remembered.begin(), pkt.remembered.end(), name) != pkt.remembered.end() &&
        (s->timeout_ms == 0 || uint64_t(pkt.remembered_age) * 1000 < s->timeout_ms))
      return Tri::True;
    return Tri::False;
  }

  // ---------------------------------------------------------------- statements

  Flow verdict(Exec& e, const VerdictSpec& v) {
    record_step(e);
    switch (v.kind) {
      case VerdictKind::None:
      case VerdictKind::Continue:
        return Flow::NextRule;
      case VerdictKind::Accept:
        return Flow::StageDone;
      case VerdictKind::Drop:
        finish(e, Verdict::Drop);
        return Flow::Finished;
      case VerdictKind::Return:
        return frame_done(e);
      case VerdictKind::Jump:
      case VerdictKind::Goto: {
        const nft::Chain* c = e.plan[e.stage].table->find_chain(v.chain);
        if (!c || c->removed) return unknown(e, "jump to a missing chain " + v.chain), Flow::Finished;
        if (e.stack.size() >= t.options_.max_depth) return unknown(e, "jump depth beyond the limit"), Flow::Finished;
        if (c->base) return unknown(e, "jump to a base chain"), Flow::Finished;
        if (v.kind == VerdictKind::Goto)
          e.stack.back() = Frame{c, 0};
        else
          e.stack.push_back(Frame{c, 0});
        return Flow::NextRule;
      }
    }
    return Flow::NextRule;
  }

  // The current frame ends (its end, or `return`): back to the caller, or the base chain's policy.
  Flow frame_done(Exec& e) {
    e.stack.pop_back();
    if (!e.stack.empty()) return Flow::NextRule;
    const nft::Chain* b = e.plan[e.stage].chain;
    if (b->policy == "drop") {
      e.rule = nullptr;
      if (t.options_.record_paths) {
        Step s = make_step(e, Step::Policy);
        s.chain = b->name;
        s.text = "policy drop";
        e.path.push_back(s);
      } else {
        name_services(e, b->name, "");
      }
      finish(e, Verdict::Drop);
      return Flow::Finished;
    }
    return Flow::StageDone;
  }

  bool in_nat_chain(const Exec& e) const { return e.plan[e.stage].chain->type == "nat"; }

  // Runs the current rule's statements from e.stmt. NextRule: the rule is done (or did
  // not match); Continue never leaves here.
  Flow exec_rule(Exec& e) {
    const RuleModel& m = *e.model;
    for (; e.stmt < m.stmts.size(); ++e.stmt) {
      const Stmt& s = m.stmts[e.stmt];
      std::string why;
      if ((s.kind == Stmt::Match || s.kind == Stmt::Vmap) && s.key.numgen_mod && !e.numgen) {
        fork_numgen(e, s.key);
        return Flow::Finished;
      }
      switch (s.kind) {
        case Stmt::Match: {
          std::vector<Value> vals;
          Tri r = values(e, s.key, &vals, &why);
          if (r == Tri::Unknown) return unknown(e, why + ": " + s.text), Flow::Finished;
          if (r == Tri::False) return Flow::NextRule;  // the rule breaks (even with !=)
          Tri hit = Tri::False;
          Field f0 = s.key.fields[0];
          if (f0 == Field::CtState || f0 == Field::CtStatus) {
            hit = (vals[0].num & s.elements[0].key[0].lo.num) ? Tri::True : Tri::False;
          } else if (s.anonymous) {
            for (const auto& el : s.elements) {
              std::string w;
              Tri h = holds(s.key, vals, el.key, &w);
              if (h == Tri::True) {
                hit = Tri::True;
                break;
              }
              if (h == Tri::Unknown) hit = Tri::Unknown, why = w;
            }
          } else {
            hit = in_set(e, s.set, s.key, vals, &why);
          }
          if (hit == Tri::Unknown) return unknown(e, why + ": " + s.text), Flow::Finished;
          if ((hit == Tri::True) == s.negate) return Flow::NextRule;
          break;
        }
        case Stmt::Vmap: {
          std::vector<Value> vals;
          Tri r = values(e, s.key, &vals, &why);
          if (r == Tri::Unknown) return unknown(e, why + ": " + s.text), Flow::Finished;
          if (r == Tri::False) return Flow::NextRule;
          VerdictSpec v;
          if (s.anonymous) {
            bool found = false;
            for (const auto& el : s.elements) {
              std::string w;
              Tri h = holds(s.key, vals, el.key, &w);
              if (h == Tri::Unknown) return unknown(e, w + ": " + s.text), Flow::Finished;
              if (h == Tri::True) {
                v = el.verdict;
                found = true;
                break;
              }
            }
            if (!found) return Flow::NextRule;
          } else {
            const nft::Set* map = find_set(e, s.set);
            if (!map) return unknown(e, "map @" + s.set + " does not exist"), Flow::Finished;
            const nft::Element* el = nullptr;
            Tri h = lookup(e, *map, s.key, vals, &el, &why);
            if (h == Tri::Unknown) return unknown(e, why + ": " + s.text), Flow::Finished;
            if (h == Tri::False) return Flow::NextRule;
            if (!el->value || !read_verdict(*el->value, &v))
              return unknown(e, "map @" + s.set + ": value not modelled"), Flow::Finished;
            if (el->comment) {
              std::string svc = trace::service_from_comment(*el->comment);
              if (!svc.empty() &&
                  std::find(e.element_services.begin(), e.element_services.end(), svc) == e.element_services.end())
                e.element_services.push_back(svc);
            }
          }
          if (t.options_.record_paths) {
            std::string n = "vmap: " + v.text();
            e.note = e.note.empty() ? n : e.note + "; " + n;
          }
          return verdict(e, v);
        }
        case Stmt::Verdict:
          return verdict(e, s.verdict);
        case Stmt::Reject:
          record_step(e);
          append_effect(&e.options, s.options);
          finish(e, Verdict::Reject);
          return Flow::Finished;
        case Stmt::Masquerade:
        case Stmt::Snat:
          record_step(e);
          if (!in_nat_chain(e) || manip_of(e.plan[e.stage].hook) != Manip::Src)
            return unknown(e, "source NAT outside a nat chain at input/postrouting"), Flow::Finished;
          if (s.kind == Stmt::Masquerade) {
            e.masq = true;
            e.src.reset();
          } else {
            e.snat = s.nat_port ? trace::host_port(*s.nat_addr, *s.nat_port) : s.nat_addr->str();
            e.src = s.nat_addr;
          }
          append_effect(&e.options, s.options);
          e.ct |= ir::kCtSnat;
          e.bound_src = true;
          return Flow::StageDone;
        case Stmt::Dnat: {
          record_step(e);
          if (!in_nat_chain(e) || manip_of(e.plan[e.stage].hook) != Manip::Dst)
            return unknown(e, "dnat outside a nat chain at prerouting/output"), Flow::Finished;
          uint16_t port = s.nat_port ? *s.nat_port : e.dport;
          if (*s.nat_addr != e.dst || port != e.dport) e.ct |= ir::kCtDnat;
          e.dst = *s.nat_addr;
          e.dport = port;
          e.dnat = true;
          append_effect(&e.options, s.options);
          e.bound_dst = true;
          return Flow::StageDone;
        }
        case Stmt::MarkSet:
          record_step(e);
          switch (s.mark_op) {
            case '|': e.mark |= s.mark_value; break;
            case '^': e.mark ^= s.mark_value; break;
            case '&': e.mark &= s.mark_value; break;
            default: e.mark = s.mark_value; break;
          }
          break;
        case Stmt::SetUpdate: {
          record_step(e);
          std::vector<Value> vals;
          Tri r = values(e, s.key, &vals, &why);
          if (r == Tri::Unknown) return unknown(e, why + ": " + s.text), Flow::Finished;
          if (r == Tri::False) return Flow::NextRule;
          if (!find_set(e, s.set)) return unknown(e, "set @" + s.set + " does not exist"), Flow::Finished;
          e.affinity.push_back(s.update_verb + " @" + s.set);
          e.updated.insert({s.set, s.key.text});
          break;
        }
        case Stmt::Noop:
          record_step(e);
          break;
        case Stmt::Unknown:
          return unknown(e, "statement not modelled: " + s.text), Flow::Finished;
      }
    }
    record_step(e);
    return Flow::NextRule;
  }

  static void append_effect(std::string* to, const std::string& x) {
    if (x.empty()) return;
    if (!to->empty()) *to += "; ";
    *to += x;
  }

  void fork_numgen(Exec& e, const Key& k) {
    for (uint32_t v = 0; v < k.numgen_mod; ++v) {
      auto share_of = [&](uint32_t w) {
        return t.options_.kernel_numgen ? numgen_kernel_share(k.numgen_mod, w) : Fraction::reciprocal(k.numgen_mod);
      };
      Fraction share = share_of(v);
      if (truncating) {  // the remaining branches together
        Fraction rest = Fraction::zero();
        for (uint32_t w = v; w < k.numgen_mod; ++w) rest = rest + share_of(w);
        truncated = truncated + e.prob * rest;
        return;
      }
      Exec c = e;
      c.prob = e.prob * share;
      c.numgen = k.numgen_offset + v;
      if (t.options_.record_paths)
        c.note = "numgen: " + std::to_string(k.numgen_offset + v) + " of mod " + std::to_string(k.numgen_mod) +
                 ", p = " + share.fraction();
      run(std::move(c));
    }
  }

  // ---------------------------------------------------------------- main loop

  void run(Exec e) {
    if (truncating) {
      truncated = truncated + e.prob;
      return;
    }
    for (;;) {
      if (e.model) {
        Flow f = exec_rule(e);
        if (f == Flow::Finished) return;
        e.model = nullptr;
        e.rule = nullptr;
        if (f == Flow::StageDone) {
          e.stack.clear();
          ++e.stage;
        }
        continue;
      }
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
        if (e.last_hook && *e.last_hook != s.hook) {
          // The hook is over: its NAT binding is made (a null binding if no rule made one).
          if (manip_of(*e.last_hook) == Manip::Dst) e.bound_dst = true;
          if (manip_of(*e.last_hook) == Manip::Src) e.bound_src = true;
        }
        e.last_hook = s.hook;
        const std::string& type = s.chain->type;
        if (type == "nat") {
          Manip m = manip_of(s.hook);
          bool bound = m == Manip::Dst ? e.bound_dst : m == Manip::Src ? e.bound_src : true;
          if (!(e.ct & ir::kCtNew) || bound) {
            ++e.stage;
            continue;
          }
        } else if (type != "filter" && type != "route") {
          e.stack.push_back(Frame{s.chain, 0});
          unknown(e, "chain type " + type + " not modelled (" + s.chain->name + ")");
          return;
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
      if (++e.evaluated > kMaxRulesPerPath) {
        unknown(e, "more than " + std::to_string(kMaxRulesPerPath) + " rules on one path (a goto cycle?)");
        return;
      }
      const nft::Rule& r = f.chain->rules[f.next++];
      e.rule = &r;
      e.rule_no = f.next;
      e.model = &t.model(r, v4);
      e.stmt = 0;
      e.step_recorded = false;
      e.numgen.reset();
      e.note.clear();
    }
  }
};

// ------------------------------------------------------------------ Tracer

Fraction numgen_kernel_share(uint32_t n, uint32_t v) {
  auto ceil_div = [](unsigned __int128 a, uint64_t b) { return static_cast<uint64_t>((a + b - 1) / b); };
  const unsigned __int128 two32 = static_cast<unsigned __int128>(1) << 32;
  uint64_t count = ceil_div((v + 1) * two32, n) - ceil_div(v * two32, n);
  return Fraction::from_dyadic(trace::Probability::ratio_pow2(count, 32));
}

Tracer::Tracer(const nft::NftState& state, TraceOptions options) : state_(state), options_(std::move(options)) {}
Tracer::~Tracer() = default;

bool Tracer::is_local(const IPAddr& a) const {
  if (a.family == IPFamily::V4 && a.bytes[0] == 127) return true;
  if (a.is_loopback()) return true;
  return std::find(options_.local_addresses.begin(), options_.local_addresses.end(), a) !=
         options_.local_addresses.end();
}

const std::vector<std::pair<const nft::Table*, const nft::Chain*>>& Tracer::base_chains() {
  if (!base_chains_read_) {
    for (const auto& tb : state_.tables)
      for (const auto& c : tb.chains)
        if (!c.removed && c.base) base_chains_.push_back({&tb, &c});
    base_chains_read_ = true;
  }
  return base_chains_;
}

const RuleModel& Tracer::model(const nft::Rule& r, bool ipv4) {
  auto it = rules_.find(&r);
  if (it == rules_.end()) it = rules_.emplace(&r, read_rule(r.canonical(), ipv4)).first;
  return it->second;
}

TraceResult Tracer::trace(const Packet& packet) {
  Impl im(*this, packet);
  Exec e;
  e.src = packet.src;
  e.dst = packet.dst;
  e.dport = packet.dport;
  e.mark = packet.mark;
  e.ct = packet.ctstate;
  // Hooks outside the model that could see the packet first: ingress (netdev, inet). (The base
  // chains, in table and creation order: a 10,000-Service table has 30,000 regular chains.)
  for (const auto& [tbp, cp] : base_chains()) {
    const nft::Table& tb = *tbp;
    const nft::Chain& c = *cp;
    bool sees = tb.family == nft::Family::Netdev || tb.family == nft::Family::Inet;
    if (!sees || (c.hook != "ingress" && c.hook != "egress")) continue;
    if (packet.origin == Origin::Node && c.hook == "ingress") continue;
    if (c.device && packet.in_iface && *c.device != *packet.in_iface && c.hook == "ingress") continue;
    Outcome o;
    o.verdict = Verdict::Unknown;
    o.unknown_reason = "the " + c.hook + " chain " + std::string(nft::family_name(tb.family)) + " " + tb.name + " " +
                       c.name + " may see the packet: not modelled";
    im.result.outcomes.push_back(std::move(o));
    return std::move(im.result);
  }
  if (packet.origin == Origin::Node) {
    im.append(e, Hook::Output);
    im.append(e, Hook::Postrouting);
  } else {
    im.append(e, Hook::Prerouting);
  }
  Stage r;
  r.kind = Stage::Route;
  e.plan.push_back(r);
  if (!(packet.ctstate & ir::kCtNew))
    im.result.notes.push_back("conntrack state is not NEW: nat chains are not consulted; addresses are taken as given");
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

}  // namespace kpc::verifier::nft_trace
