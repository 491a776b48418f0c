// The IPVS concrete tracer (issue 17 §3): one packet through a node as kube-proxy's IPVS mode
// programs it (program_set.h), in the kernel's hook order:
//
//   from a pod or an external host:
//     PREROUTING raw, mangle, nat (companion rules: KUBE-SERVICES marks for masquerading) ->
//     routing: the destination is local when bound on kube-ipvs0 (node.plan) or an address of
//       the node; otherwise FORWARD + POSTROUTING, IPVS not involved ->
//     INPUT mangle, filter, security (KUBE-NODE-PORT, KUBE-PROXY-FIREWALL, KUBE-IPVS-FILTER) ->
//     IPVS at LOCAL_IN (ip_vs_in_hook, priority NF_IP_PRI_NAT_SRC - 1: before nat INPUT):
//       no virtual server (protocol, address, port; a port-0 persistent service catches all
//       ports): nat INPUT, delivered locally;
//       a virtual server: the scheduler's choice (scheduler.h), persistence (-p) per client;
//       no real server with weight > 0: ip_vs_schedule finds no destination and ip_vs_leave
//       sends ICMP port unreachable and drops (REJECT, "icmp-port-unreachable");
//       a masquerading (-m) real server: the destination is rewritten and the packet is sent
//       on through LOCAL_OUT (ip_vs_nat_xmit -> NF_HOOK(LOCAL_OUT)): OUTPUT raw, mangle,
//       filter, security (nat OUTPUT is not consulted: the connection's destination binding was
//       made in PREROUTING), then POSTROUTING mangle, nat (KUBE-POSTROUTING: masquerade by mark
//       or by KUBE-LOOP-BACK); `-m ipvs` matches it (xt_ipvs).
//   from the node itself: OUTPUT raw, mangle, nat, then IPVS at LOCAL_OUT (priority
//     NF_IP_PRI_NAT_DST + 2: after nat OUTPUT, before filter OUTPUT), then as above.
//
// Everything the program does not determine is Unknown with the reason: a scheduler that
// chooses by connection counts or a hash, gatewaying/tunnelling real servers, a real server
// on the node's own address, a packet that is not the first of its connection (IPVS forwards
// it by its connection entry). Each outcome has an exact probability (the scheduler's shares
// times the companion rules' statistic factors, which kube-proxy's IPVS rules do not use).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "verifier/ipvs_trace/program_set.h"
#include "verifier/ipvs_trace/scheduler.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::ipvs_trace {

/// Persistence (ipvsadm -p): does IPVS hold a template for this client?
struct Client {
  std::optional<ipvs::HostPort> remembered;  ///< unset: a new client; set: the template's real server
  uint32_t age = 0;                          ///< seconds since the template was last used
};

struct TraceOptions {
  /// The node's addresses besides kube-ipvs0's (which node.plan gives).
  std::vector<IPAddr> local_addresses;
  /// Schedulers other than rr/wrr/fo: weight-proportional shares instead of Unknown (scheduler.h).
  bool equal_shares_for_others = false;
  size_t max_outcomes = 100000;
};

struct Step {
  enum Kind : uint8_t { Rule, NotTaken, Policy, Unknown, Ipvs };
  Kind kind = Rule;
  std::string table;  ///< iptables table, or "ipvs"
  std::string chain;  ///< iptables chain, or the IPVS hook (LOCAL_IN / LOCAL_OUT)
  uint32_t rule_no = 0;
  std::string text;  ///< save form (iptables) or ipvsadm -S form (IPVS)
  std::string comment, note;
};

struct Outcome {
  Fraction probability;
  trace::Verdict verdict = trace::Verdict::Accept;
  /// "ipvs-nat" (IPVS sent it to a real server), "local", "forward", "output"; empty unless accepted.
  std::string route;
  std::string virtual_server;  ///< "TCP 10.96.0.10:53" when IPVS took the packet
  bool dnat = false;           ///< the real server (IPVS NAT) or an iptables DNAT
  std::string dnat_text;
  bool masquerade = false;
  std::string snat_text;
  uint32_t final_mark = 0;
  std::string options;   ///< e.g. "icmp-port-unreachable (ip_vs_leave)"
  std::string affinity;  ///< persistence: the template made or used
  std::string unknown_reason;
  std::vector<Step> path;
};

struct TraceResult {
  std::vector<Outcome> outcomes;
  std::vector<std::string> notes;
  Fraction total() const;
};

class Tracer {
 public:
  Tracer(const ProgramSet& set, TraceOptions options);
  /// Traces one packet (its family must be the program set's). Packet::remembered and the
  /// bridge fields are read by the companion rules as in the iptables tracer.
  TraceResult trace(const trace::Packet& packet, const Client& client);
  bool is_local(const IPAddr& a) const;
  /// Every address taken as the node's: kube-ipvs0's, then the options'.
  std::vector<IPAddr> local_addresses() const;

 private:
  const ProgramSet& set_;
  TraceOptions options_;
  trace::Tracer iptables_;
};

/// The virtual-server addresses that node.plan does not bind: kube-proxy makes those only for
/// the node's own addresses (NodePorts, external and load-balancer IPs already on another
/// interface), so they are the node's. Sorted, unique.
std::vector<IPAddr> inferred_node_addresses(const ProgramSet& set);

/// The virtual server IPVS finds for (proto, address, port): exact, else a persistent port-0
/// service of the address (ip_vs_service_find's catch-all). nullptr: none.
const ipvs::VirtualServer* find_virtual_server(const ipvs::Table& t, uint8_t proto, const IPAddr& addr,
                                               uint16_t port);

/// Distribution over distinct results (verdict, real server, masquerade, unknown reason).
struct DistributionEntry {
  trace::Verdict verdict = trace::Verdict::Accept;
  std::string dnat_text;
  bool masquerade = false;
  std::string unknown_reason;
  Fraction probability = Fraction::zero();
  size_t outcomes = 0;
};
std::vector<DistributionEntry> distribution(const TraceResult& r);

/// Text report (kpc trace on an IPVS program set).
std::string format_text(const trace::Packet& packet, const Client& client, const std::vector<IPAddr>& locals,
                        const TraceResult& r);

}  // namespace kpc::verifier::ipvs_trace
