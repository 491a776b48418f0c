#include "verifier/ipvs_trace/tracer.h"

#include <algorithm>
#include <cstdio>

#include "compiler/ir/rule.h"
#include "compiler/support/text.h"

namespace kpc::verifier::ipvs_trace {

using trace::Verdict;
using ir::TableId;

namespace {

ipvs::Proto ipvs_proto(uint8_t p, bool* ok) {
  *ok = true;
  if (p == trace::kProtoTCP) return ipvs::Proto::TCP;
  if (p == trace::kProtoUDP) return ipvs::Proto::UDP;
  if (p == trace::kProtoSCTP) return ipvs::Proto::SCTP;
  *ok = false;
  return ipvs::Proto::TCP;
}

const char* ipvsadm_proto_flag(ipvs::Proto p) {
  switch (p) {
    case ipvs::Proto::TCP:
      return "-t";
    case ipvs::Proto::UDP:
      return "-u";
    case ipvs::Proto::SCTP:
      return "--sctp-service";
  }
  return "?";
}

std::string hp(const ipvs::HostPort& h) { return trace::host_port(h.address, h.port); }

std::string vs_text(const ipvs::VirtualServer& vs) {
  std::string s = std::string("-A ") + ipvsadm_proto_flag(vs.key.proto) + " " + hp(vs.key.vip) + " -s " + vs.scheduler;
  if (vs.persistent) s += " -p " + std::to_string(vs.timeout);
  if (!vs.flags.empty()) s += " -b " + vs.flags;
  return s;
}

const char* forward_flag(ipvs::Forward f) {
  switch (f) {
    case ipvs::Forward::Gate:
      return "-g";
    case ipvs::Forward::Ipip:
      return "-i";
    case ipvs::Forward::Masq:
      return "-m";
  }
  return "?";
}

std::string rs_text(const ipvs::VirtualServer& vs, const ipvs::RealServer& rs) {
  return std::string("-a ") + ipvsadm_proto_flag(vs.key.proto) + " " + hp(vs.key.vip) + " -r " + hp(rs.dest) + " " +
         forward_flag(rs.forward) + " -w " + std::to_string(rs.weight);
}

std::vector<trace::StageSpec> stages(std::initializer_list<std::pair<TableId, const char*>> l) {
  std::vector<trace::StageSpec> v;
  for (auto [t, c] : l) v.push_back({t, c});
  return v;
}

// What one partial walk carries to the next.
struct Partial {
  Fraction p = Fraction::one();
  trace::StageStart at;
  std::vector<Step> path;
  std::string virtual_server, affinity, options;
};

}  // namespace

Fraction TraceResult::total() const {
  Fraction t = Fraction::zero();
  for (const auto& o : outcomes) t = t + o.probability;
  return t;
}

const ipvs::VirtualServer* find_virtual_server(const ipvs::Table& t, uint8_t proto, const IPAddr& addr,
                                               uint16_t port) {
  bool ok = false;
  ipvs::Proto p = ipvs_proto(proto, &ok);
  if (!ok) return nullptr;
  auto it = t.services.find(ipvs::ServiceKey{p, {addr, port}});
  if (it != t.services.end()) return &it->second;
  it = t.services.find(ipvs::ServiceKey{p, {addr, 0}});
  if (it != t.services.end() && it->second.persistent) return &it->second;
  return nullptr;
}

std::vector<IPAddr> inferred_node_addresses(const ProgramSet& set) {
  std::vector<IPAddr> out;
  for (const auto& [key, vs] : set.ipvs.services) {
    const IPAddr& a = key.vip.address;
    if (std::find(set.plan.bound.begin(), set.plan.bound.end(), a) == set.plan.bound.end()) out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {
trace::TraceOptions iptables_options(const ProgramSet& set, const TraceOptions& o) {
  trace::TraceOptions t;
  t.local_addresses = set.plan.bound;
  t.local_addresses.insert(t.local_addresses.end(), o.local_addresses.begin(), o.local_addresses.end());
  t.ipsets = &set.sets;
  t.max_outcomes = o.max_outcomes;
  return t;
}
}  // namespace

Tracer::Tracer(const ProgramSet& set, TraceOptions options)
    : set_(set), options_(std::move(options)), iptables_(set.iptables, iptables_options(set, options_)) {}

bool Tracer::is_local(const IPAddr& a) const { return iptables_.is_local(a); }

std::vector<IPAddr> Tracer::local_addresses() const { return iptables_.options().local_addresses; }

namespace {

struct Run {
  Tracer& self;
  const ProgramSet& set;
  const TraceOptions& opt;
  trace::Tracer& ipt;
  const trace::Packet& pkt;
  const Client& client;
  TraceResult result;

  static Step convert(const trace::Step& s) {
    Step o;
    static const Step::Kind kinds[] = {Step::Rule, Step::NotTaken, Step::Policy, Step::Unknown};
    o.kind = kinds[s.kind];
    o.table = ir::table_name(s.table);
    o.chain = s.chain;
    o.rule_no = s.rule_no;
    o.text = s.text;
    o.comment = s.comment;
    o.note = s.note;
    return o;
  }

  void emit(const Partial& pa, Verdict v, std::string route, std::string why = {}) {
    Outcome o;
    o.probability = pa.p;
    o.verdict = v;
    if (v == Verdict::Accept) o.route = std::move(route);
    o.virtual_server = pa.virtual_server;
    o.dnat = pa.at.dnat;
    if (o.dnat) o.dnat_text = trace::host_port(pa.at.dst, pa.at.dport);
    o.masquerade = pa.at.masquerade;
    o.final_mark = pa.at.mark;
    o.options = pa.options;
    o.affinity = pa.affinity;
    o.unknown_reason = std::move(why);
    o.path = pa.path;
    result.outcomes.push_back(std::move(o));
  }

  // Runs the companion rules' stages from pa; calls next(partial) for each accepted outcome,
  // emits the others. final_route: the route of an accepted outcome when next is empty.
  template <typename Next>
  void walk(const Partial& pa, const std::vector<trace::StageSpec>& st, Next next) {
    trace::TraceResult r = trace_stages(ipt, pkt, st, pa.at);
    for (const auto& n : r.notes)
      if (std::find(result.notes.begin(), result.notes.end(), n) == result.notes.end()) result.notes.push_back(n);
    for (auto& o : r.outcomes) {
      Partial q = pa;
      q.p = pa.p * Fraction::from_dyadic(o.probability);
      if (o.dnat) q.at.dst = o.dnat_addr, q.at.dport = o.dnat_port, q.at.dnat = true;
      q.at.masquerade = o.masquerade;
      q.at.mark = o.final_mark;
      if (!o.options.empty()) q.options += (q.options.empty() ? "" : "; ") + o.options;
      if (!o.snat_text.empty()) q.options += (q.options.empty() ? "" : "; ") + ("SNAT " + o.snat_text);
      if (!o.affinity.empty())
        q.options += (q.options.empty() ? "" : "; ") +
                     ("recent " + trace::affinity_text(o.affinity, [](const std::string& l) { return l; }));
      for (const auto& s : o.path) q.path.push_back(convert(s));
      if (o.verdict != Verdict::Accept) {
        emit(q, o.verdict, "", o.unknown_reason);
        continue;
      }
      next(q);
    }
  }

  void after_ipvs_nat(const Partial& pa) {
    walk(pa,
         stages({{TableId::Raw, "OUTPUT"},
                 {TableId::Mangle, "OUTPUT"},
                 {TableId::Filter, "OUTPUT"},
                 {TableId::Security, "OUTPUT"},
                 {TableId::Mangle, "POSTROUTING"},
                 {TableId::Nat, "POSTROUTING"}}),
         [&](const Partial& q) { emit(q, Verdict::Accept, "ipvs-nat"); });
  }

  // Persistence: the template IPVS uses for this client, or the scheduler (ip_vs_sched_persist,
  // ip_vs_check_template). Appends the IPVS steps and goes on per real server.
  void ipvs_at(Partial pa, const ipvs::VirtualServer& vs, const char* hook) {
    pa.virtual_server = std::string(ipvs::proto_name(vs.key.proto)) + " " + hp(vs.key.vip);
    Step head;
    head.kind = Step::Ipvs;
    head.table = "ipvs";
    head.chain = hook;
    head.text = vs_text(vs);
    head.note = "virtual server for " + std::string(trace::proto_name(pkt.proto)) + " " +
                trace::host_port(pa.at.dst, pa.at.dport);
    pa.path.push_back(head);
    if (!(pkt.ctstate & ir::kCtNew)) {
      emit(pa, Verdict::Unknown, "",
           "not the first packet of its connection: IPVS forwards it by its connection entry (ip_vs_conn_in_get), "
           "which the program set does not hold");
      return;
    }
    Schedule sch;
    if (vs.persistent && client.remembered) {
      const ipvs::RealServer* rs = vs.find(*client.remembered);
      std::string who = "template of this client to " + hp(*client.remembered);
      if (client.age >= vs.timeout) {
        pa.affinity = who + " expired (last used " + std::to_string(client.age) + " s ago, timeout " +
                      std::to_string(vs.timeout) + " s): scheduled anew, new template";
        sch = schedule(vs, opt.equal_shares_for_others);
      } else if (!rs) {
        pa.affinity = who + ": not a real server of this virtual server (deleted: the template's destination is not "
                            "available, ip_vs_check_template expires it): scheduled anew, new template";
        sch = schedule(vs, opt.equal_shares_for_others);
      } else if (rs->weight == 0 && set.sysctl("net.ipv4.vs.expire_quiescent_template") != 0) {
        pa.affinity = who + ": weight 0 and expire_quiescent_template = 1 (ip_vs_check_template expires it): "
                            "scheduled anew, new template";
        sch = schedule(vs, opt.equal_shares_for_others);
      } else {
        pa.affinity = who + " (last used " + std::to_string(client.age) + " s ago < " + std::to_string(vs.timeout) +
                      " s): same real server" +
                      (rs->weight == 0 ? " although its weight is 0 (expire_quiescent_template = 0)" : "");
        sch.shares.push_back({rs, Fraction::one()});
        sch.note = "persistence: the client's template";
      }
    } else {
      sch = schedule(vs, opt.equal_shares_for_others);
      if (vs.persistent)
        pa.affinity = "new client: a template for " + pkt.src.str() + " (timeout " + std::to_string(vs.timeout) +
                      " s) to the chosen real server";
    }
    if (!sch.why.empty()) {
      pa.path.back().kind = Step::Unknown;
      emit(pa, Verdict::Unknown, "", sch.why);
      return;
    }
    if (sch.shares.empty()) {
      // ip_vs_schedule: no destination; ip_vs_leave: ICMP port unreachable, NF_DROP.
      pa.path.back().note += "; " + sch.note + ": ip_vs_schedule finds no destination, ip_vs_leave sends ICMP port "
                                               "unreachable and drops";
      pa.options += (pa.options.empty() ? "" : "; ") + std::string("icmp-port-unreachable (ip_vs_leave)");
      emit(pa, Verdict::Reject, "");
      return;
    }
    for (const auto& sh : sch.shares) {
      Partial q = pa;
      q.p = pa.p * sh.probability;
      Step st;
      st.kind = Step::Ipvs;
      st.table = "ipvs";
      st.chain = hook;
      st.text = rs_text(vs, *sh.server);
      st.note = sch.note + ", p = " + sh.probability.fraction();
      q.path.push_back(st);
      if (sh.server->forward != ipvs::Forward::Masq) {
        emit(q, Verdict::Unknown, "",
             std::string("real server forwarding ") + forward_flag(sh.server->forward) +
                 " (gatewaying/tunnelling) not modelled: kube-proxy uses masquerading (-m)");
        continue;
      }
      if (self.is_local(sh.server->dest.address)) {
        emit(q, Verdict::Unknown, "",
             "real server " + hp(sh.server->dest) +
                 " is an address of this node: IPVS delivers the connection locally (ip_vs_nat_xmit), not modelled");
        continue;
      }
      q.at.dst = sh.server->dest.address;
      q.at.dport = sh.server->dest.port ? sh.server->dest.port : pa.at.dport;
      q.at.dnat = true;
      trace::IpvsProperty prop;
      prop.vproto = pkt.proto;
      prop.vaddr = vs.key.vip.address;
      prop.vport = vs.key.vip.port ? vs.key.vip.port : pa.at.dport;
      q.at.ipvs = prop;
      after_ipvs_nat(q);
    }
  }

  // The destination has no virtual server: the packet goes on as without IPVS.
  void no_virtual_server(const Partial& pa, bool node) {
    if (!node) {
      walk(pa, stages({{TableId::Nat, "INPUT"}}), [&](const Partial& q) { emit(q, Verdict::Accept, "local"); });
      return;
    }
    bool local = self.is_local(pa.at.dst);
    walk(pa,
         stages({{TableId::Filter, "OUTPUT"},
                 {TableId::Security, "OUTPUT"},
                 {TableId::Mangle, "POSTROUTING"},
                 {TableId::Nat, "POSTROUTING"}}),
         [&](const Partial& q) {
           if (!local) {
             emit(q, Verdict::Accept, "output");
             return;
           }
           // Back in through lo: PREROUTING raw/mangle, INPUT mangle/filter/security (nat done).
           walk(q,
                stages({{TableId::Raw, "PREROUTING"},
                        {TableId::Mangle, "PREROUTING"},
                        {TableId::Mangle, "INPUT"},
                        {TableId::Filter, "INPUT"},
                        {TableId::Security, "INPUT"}}),
                [&](const Partial& r) { emit(r, Verdict::Accept, "local"); });
         });
  }

  void ipvs_lookup(const Partial& pa, bool node) {
    const ipvs::VirtualServer* vs = find_virtual_server(set.ipvs, pkt.proto, pa.at.dst, pa.at.dport);
    if (!vs) {
      no_virtual_server(pa, node);
      return;
    }
    ipvs_at(pa, *vs, node ? "LOCAL_OUT" : "LOCAL_IN");
  }

  void run() {
    Partial start;
    start.at.dst = pkt.dst;
    start.at.dport = pkt.dport;
    start.at.mark = pkt.mark;
    start.at.ctstate = pkt.ctstate;
    bool node = pkt.origin == trace::Origin::Node;
    if (node) {
      walk(start, stages({{TableId::Raw, "OUTPUT"}, {TableId::Mangle, "OUTPUT"}, {TableId::Nat, "OUTPUT"}}),
           [&](const Partial& q) { ipvs_lookup(q, true); });
      return;
    }
    walk(start, stages({{TableId::Raw, "PREROUTING"}, {TableId::Mangle, "PREROUTING"}, {TableId::Nat, "PREROUTING"}}),
         [&](const Partial& q) {
           if (!self.is_local(q.at.dst)) {
             walk(q,
                  stages({{TableId::Mangle, "FORWARD"},
                          {TableId::Filter, "FORWARD"},
                          {TableId::Security, "FORWARD"},
                          {TableId::Mangle, "POSTROUTING"},
                          {TableId::Nat, "POSTROUTING"}}),
                  [&](const Partial& r) { emit(r, Verdict::Accept, "forward"); });
             return;
           }
           walk(q, stages({{TableId::Mangle, "INPUT"}, {TableId::Filter, "INPUT"}, {TableId::Security, "INPUT"}}),
                [&](const Partial& r) { ipvs_lookup(r, false); });
         });
  }
};

}  // namespace

TraceResult Tracer::trace(const trace::Packet& packet, const Client& client) {
  Run run{*this, set_, options_, iptables_, packet, client, {}};
  if (!(packet.ctstate & ir::kCtNew))
    run.result.notes.push_back("conntrack state is not NEW: the nat table is not consulted, and a packet IPVS "
                               "takes is forwarded by a connection entry the program does not hold (Unknown)");
  else if (packet.proto == trace::kProtoTCP)
    run.result.notes.push_back(
        "assumed: IPVS holds no connection entry for this client address and port (a reused source port is "
        "rescheduled or not by conn_reuse_mode = " +
        std::to_string(set_.sysctl("net.ipv4.vs.conn_reuse_mode")) +
        ", see kpc ipvs drain-plan and seed 004_098315146610bdd0.txt)");
  run.run();
  return std::move(run.result);
}

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
    ++it->outcomes;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const DistributionEntry& a, const DistributionEntry& b) { return a.probability > b.probability; });
  return out;
}

namespace {
std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}
}  // namespace

std::string format_text(const trace::Packet& pkt, const Client& client, const std::vector<IPAddr>& locals,
                        const TraceResult& r) {
  std::string out = "backend: ipvs (kube-proxy IPVS mode: ipvs.rules, ipset.rules, iptables.rules, node.plan)\n";
  out += "packet: ";
  out += trace::proto_name(pkt.proto);
  out += " " + (pkt.src.family == IPFamily::V6 ? "[" + pkt.src.str() + "]" : pkt.src.str()) + ":" +
         (pkt.sport ? std::to_string(*pkt.sport) : std::string("*"));
  out += " -> " + trace::host_port(pkt.dst, pkt.dport);
  out += ", from ";
  out += trace::origin_name(pkt.origin);
  if (pkt.origin != trace::Origin::Node)
    out += " (in " + (pkt.in_iface ? printable(*pkt.in_iface) : std::string("?")) + ")";
  out += ", ct " + ir::ctstate_text(pkt.ctstate) + ", mark " + hex(pkt.mark);
  if (client.remembered)
    out += ", client with a persistence template to " + hp(*client.remembered) + " (last used " +
           std::to_string(client.age) + " s ago)";
  else
    out += ", new client";
  out += "\nlocal addresses:";
  for (const auto& a : locals) out += " " + a.str();
  out += pkt.dst.family == IPFamily::V4 ? " (and 127.0.0.0/8)\n" : " (and ::1)\n";
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  out += std::to_string(r.outcomes.size()) + (r.outcomes.size() == 1 ? " outcome\n" : " outcomes\n");
  size_t k = 0;
  for (const auto& o : r.outcomes) {
    ++k;
    out += "\n[" + std::to_string(k) + "] p = " + o.probability.fraction() + " ~ " + o.probability.decimal(10) + "  " +
           trace::verdict_name(o.verdict);
    if (!o.route.empty()) out += " (" + o.route + ")";
    if (!o.virtual_server.empty()) out += "  IPVS " + o.virtual_server;
    if (o.dnat) out += (o.virtual_server.empty() ? "  DNAT " : " -> ") + o.dnat_text;
    out += std::string("  masquerade: ") + (o.masquerade ? "yes" : "no");
    out += "  mark " + hex(o.final_mark);
    if (!o.options.empty()) out += "  [" + printable(o.options) + "]";
    out += "\n";
    if (!o.affinity.empty()) out += "    affinity: " + printable(o.affinity) + "\n";
    if (o.verdict == Verdict::Unknown) out += "    unknown: " + printable(o.unknown_reason) + "\n";
    for (const auto& s : o.path) {
      char head[96];
      std::snprintf(head, sizeof head, "    %-8s %-28s ", s.table.c_str(), printable(s.chain).c_str());
      out += head;
      if (s.kind == Step::Policy)
        out += "policy ";
      else if (s.kind != Step::Ipvs)
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
      out += "  " + d.probability.decimal(10) + "  " + d.probability.fraction() + "  " + trace::verdict_name(d.verdict);
      if (!d.dnat_text.empty()) out += " -> " + d.dnat_text;
      if (d.masquerade) out += " masquerade";
      if (!d.unknown_reason.empty()) out += " (" + printable(d.unknown_reason) + ")";
      out += "\n";
    }
  }
  Fraction total = r.total();
  if (!total.is_one()) out += "total probability " + total.fraction() + " (not 1)\n";
  return out;
}

}  // namespace kpc::verifier::ipvs_trace
