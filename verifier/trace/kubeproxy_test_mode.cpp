// kube-proxy's unit-test packet tracer (tracePacket in pkg/proxy/iptables/proxier_test.go),
// reproduced rule for rule so that the flows transcribed from those tests can be replayed
// on kpc's programs. Its shortcuts are deliberate (they are what the expectations
// were written against): see tracer.h, "kube-proxy test mode".
#include <set>

#include "verifier/trace/tracer.h"

namespace kpc::verifier::trace {
namespace {

using ir::ArgKind;
using ir::TableId;
using ir::TargetKind;

struct KpTracer {
  const RulesetState& state;
  Tracer rules;  // only its typed-rule cache is used
  std::set<std::string> local;
  KubeProxyTestResult res;
  std::vector<std::string> outputs;

  KpTracer(const RulesetState& s) : state(s), rules(s, TraceOptions{}) {}

  // addressMatches: a CIDR value tests containment, a bare IP equality; the packet's
  // address is parsed "sloppily" and the test fails on an unparsable one.
  bool address_matches(const ir::Arg& a, const std::string& ip, bool* fatal) {
    auto addr = IPAddr::parse(ip, /*sloppy=*/true);
    if (!addr) {
      res.error = "Bad IP in test case: " + ip;
      *fatal = true;
      return false;
    }
    bool m = a.cidr.contains(*addr);
    return m != a.neg;
  }

  // IPTablesValue.Matches: the value as written, compared as a string, "!" inverts.
  static bool value_matches(const std::string& value, bool neg, const std::string& x) { return (value == x) != neg; }

  static std::string port_text(const ir::Arg& a) {
    if (a.value == a.value2) return std::to_string(a.value);
    return std::to_string(a.value) + ":" + std::to_string(a.value2);
  }

  bool rule_matches(const ir::Rule& r, const std::string& src, const std::string& proto, const std::string& dst,
                    const std::string& dport, bool* fatal) {
    // ParseRule keeps one value per option (the last one written).
    const ir::Arg *s = nullptr, *stype = nullptr, *p = nullptr, *d = nullptr, *dtype = nullptr, *dp = nullptr;
    bool affinity = false, mark = false, ctstate = false;
    for (const auto& a : r.args) {
      switch (a.kind) {
        case ArgKind::Src:
          s = &a;
          break;
        case ArgKind::SrcType:
          stype = &a;
          break;
        case ArgKind::Proto:
          p = &a;
          break;
        case ArgKind::Dst:
          d = &a;
          break;
        case ArgKind::DstType:
          dtype = &a;
          break;
        case ArgKind::DPort:
          dp = &a;
          break;
        case ArgKind::RecentCmd:
          affinity = affinity || a.text == "rcheck";
          break;
        case ArgKind::MarkMatch:
          mark = true;
          break;
        case ArgKind::CtState:
          ctstate = ctstate || a.text2 != "--state";
          break;
        default:
          break;
      }
    }
    if (s && !address_matches(*s, src, fatal)) return false;
    if (*fatal) return false;
    if (stype && !value_matches(stype->text, stype->neg, local.count(src) ? "LOCAL" : "not-matched")) return false;
    if (p && !value_matches(p->text, p->neg, proto)) return false;
    if (d && !address_matches(*d, dst, fatal)) return false;
    if (*fatal) return false;
    if (dtype && !value_matches(dtype->text, dtype->neg, local.count(dst) ? "LOCAL" : "not-matched")) return false;
    if (dp && !value_matches(port_text(*dp), dp->neg, dport)) return false;
    if (affinity || mark || ctstate) return false;
    return true;
  }

  // The `-j` value as that parser reads it ("" = no -j: skipped).
  static std::string jump_value(const ir::Target& t) {
    switch (t.kind) {
      case TargetKind::None:
        return "";
      case TargetKind::Goto:
        return "";  // "-g" is not an option that parser knows
      case TargetKind::Jump:
        return t.chain;
      case TargetKind::Accept:
        return "ACCEPT";
      case TargetKind::Drop:
        return "DROP";
      case TargetKind::Return:
        return "RETURN";
      case TargetKind::Reject:
        return "REJECT";
      case TargetKind::DNAT:
        return "DNAT";
      case TargetKind::SNAT:
        return "SNAT";
      case TargetKind::Masquerade:
        return "MASQUERADE";
      case TargetKind::Mark:
        return "MARK";
      case TargetKind::Other:
        return t.chain;
    }
    return "";
  }

  static std::string dnat_value(const ir::Target& t) {
    std::string out;
    bool v6 = t.to_addr && t.to_addr->family == IPFamily::V6;
    if (t.to_addr) out += v6 && t.to_port_lo ? "[" + t.to_addr->str() + "]" : t.to_addr->str();
    if (t.to_port_lo) {
      out += ":" + std::to_string(t.to_port_lo);
      if (t.to_port_hi != t.to_port_lo) out += "-" + std::to_string(t.to_port_hi);
    }
    return out;
  }

  bool run_chain(TableId table, const std::string& chain, const std::string& src, const std::string& proto,
                 const std::string& dst, const std::string& dport, int depth = 0) {
    const Chain* c = state.find(table, chain);
    if (!c || !res.error.empty()) return false;
    if (depth > 64) {
      res.error = "chain depth beyond 64 at " + chain;
      return false;
    }
    for (uint32_t id : c->rules) {
      const ir::Rule* r = rules.rule(table, chain, id);
      if (!r) {
        res.error = "rule does not re-parse: -A " + chain + std::string(state.store->text(id));
        return false;
      }
      std::string jump = jump_value(r->target);
      if (jump.empty()) continue;
      bool fatal = false;
      bool m = rule_matches(*r, src, proto, dst, dport, &fatal);
      if (fatal) return false;
      if (!m) continue;
      res.matches.push_back("-A " + chain + std::string(state.store->text(id)));
      if (jump == "KUBE-MARK-MASQ") {
        res.masq = true;
        continue;
      }
      if (jump == "ACCEPT" || jump == "REJECT" || jump == "DROP") {
        outputs.push_back(jump);
        return true;
      }
      if (jump == "DNAT") {
        outputs.push_back(dnat_value(r->target));
        return true;
      }
      bool terminated = run_chain(table, jump, src, proto, dst, dport, depth + 1);
      if (!res.error.empty()) return false;
      bool probabilistic = false;
      for (const auto& a : r->args)
        if (a.kind == ArgKind::Probability) probabilistic = true;
      if (terminated && !probabilistic) return true;
    }
    return false;
  }
};

}  // namespace

KubeProxyTestResult trace_kube_proxy_test(const RulesetState& state, const std::string& source_ip,
                                          const std::string& protocol, const std::string& dest_ip,
                                          const std::string& dest_port, const std::vector<std::string>& local_ips) {
  KpTracer t(state);
  t.local = {"127.0.0.1", "::1"};
  t.local.insert(local_ips.begin(), local_ips.end());
  std::string dst = dest_ip;
  t.run_chain(TableId::Nat, "PREROUTING", source_ip, protocol, dst, dest_port);
  if (!t.outputs.empty()) dst = t.outputs[0].substr(0, t.outputs[0].find(':'));
  for (const char* c : {"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL"})
    t.run_chain(TableId::Filter, c, source_ip, protocol, dst, dest_port);
  for (size_t i = 0; i < t.outputs.size(); ++i) {
    if (i) t.res.output += ", ";
    t.res.output += t.outputs[i];
  }
  return std::move(t.res);
}

}  // namespace kpc::verifier::trace
