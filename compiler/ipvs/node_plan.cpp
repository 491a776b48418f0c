#include "compiler/ipvs/node_plan.h"

#include <charconv>

namespace kpc::ipvs {

namespace {

std::string seed_ref() { return std::string("seed ") + kSeed; }

}  // namespace

std::optional<KernelVersion> parse_kernel_version(std::string_view s) {
  int parts[3] = {0, 0, 0};
  size_t i = 0;
  int n = 0;
  while (n < 3) {
    size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == start || i - start > 6) break;
    std::from_chars(s.data() + start, s.data() + i, parts[n]);
    ++n;
    if (i < s.size() && s[i] == '.' && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') {
      ++i;
      continue;
    }
    break;
  }
  if (n < 2) return std::nullopt;  // ParseGeneric needs at least "X.Y"
  return KernelVersion{parts[0], parts[1], parts[2]};
}

bool valid_kernel_release(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-' ||
              c == '_' || c == '+' || c == '~';
    if (!ok) return false;
  }
  return parse_kernel_version(s).has_value();
}

NodePlan node_plan(const Program& prog, const PlanInput& in) {
  NodePlan plan;
  const bool v6 = prog.family == IPFamily::V6;
  plan.device.push_back({"kube-proxy's dummy device (EnsureDummyDevice): virtual-server addresses are bound to it so "
                         "that the node accepts their packets and IPVS (on INPUT) serves them",
                         "ip link add kube-ipvs0 type dummy"});
  for (const auto& b : prog.bound) {
    std::string reason;
    for (const auto& r : b.reasons) reason += (reason.empty() ? "" : "; ") + r;
    plan.device.push_back(
        {reason, "ip addr add " + b.address.str() + (v6 ? "/128" : "/32") + " dev kube-ipvs0"});
  }

  auto kv = parse_kernel_version(in.kernel_release);
  const KernelVersion k = kv.value_or(KernelVersion{});
  const std::string kernel = "kernel " + in.kernel_release;
  auto& s = plan.sysctls;
  s.push_back({"IPVS keeps conntrack entries for the connections it schedules, so that the companion iptables rules "
               "(MASQUERADE of marked packets, --ctstate matches) see them; with it, a reused client port that IPVS "
               "reschedules loses its first SYN (a 1 s stall) - " + seed_ref(),
               "net.ipv4.vs.conntrack = 1"});
  if (k < KernelVersion{4, 1, 0}) {
    s.push_back({"net.ipv4.vs.conn_reuse_mode not set: " + kernel + " is older than 4.1, which has no such sysctl "
                 "(kube-proxy logs an error and goes on)",
                 ""});
  } else if (k >= KernelVersion{5, 9, 0}) {
    s.push_back({"net.ipv4.vs.conn_reuse_mode left as it is: " + kernel +
                     " >= 5.9 reschedules a reused port without dropping its SYN when conntrack is on "
                     "(kubernetes#93297), so kube-proxy keeps the default 1 - " + seed_ref(),
                 ""});
  } else {
    s.push_back({kernel + " (>= 4.1, < 5.9): a new connection on a reused client port goes to the real server of the "
                 "old one instead of being rescheduled, avoiding the 1 s SYN drop of mode 1 with conntrack on; the "
                 "price: such connections keep reaching a weight-0 (draining) real server, expire_nodest_conn does "
                 "not act on it and graceful termination can stall under a busy client (kubernetes#81775) - " +
                     seed_ref(),
                 "net.ipv4.vs.conn_reuse_mode = 0"});
  }
  s.push_back({"a packet of a connection whose real server was deleted expires that connection at once (the client "
               "reconnects) instead of being dropped silently; it does not act on weight-0 servers under "
               "conn_reuse_mode 0 - " + seed_ref(),
               "net.ipv4.vs.expire_nodest_conn = 1"});
  s.push_back({"persistence templates (ClientIP affinity) of a quiescent (weight-0) real server expire, so that "
               "affinity does not keep sending new connections to a draining server - " + seed_ref(),
               "net.ipv4.vs.expire_quiescent_template = 1"});
  s.push_back({"IPVS NAT (masquerading) forwards the packets it rewrites", "net.ipv4.ip_forward = 1"});
  if (in.strict_arp) {
    s.push_back({"ipvs.strictARP: answer ARP only for addresses of the receiving interface, so kube-ipvs0's addresses "
                 "are not announced on the node's links",
                 "net.ipv4.conf.all.arp_ignore = 1"});
    s.push_back({"ipvs.strictARP: use the outgoing interface's own address as ARP source, never a kube-ipvs0 address",
                 "net.ipv4.conf.all.arp_announce = 2"});
  }
  if (in.tcp_timeout_s > 0 || in.tcp_fin_timeout_s > 0 || in.udp_timeout_s > 0) {
    plan.timeouts.push_back(
        {"ipvs.tcpTimeout, tcpFinTimeout, udpTimeout (seconds; 0 keeps the kernel's value): IPVS connection timeouts "
         "(ConfigureTimeouts, like ipvsadm --set)",
         "ipvsadm --set " + std::to_string(in.tcp_timeout_s) + " " + std::to_string(in.tcp_fin_timeout_s) + " " +
             std::to_string(in.udp_timeout_s)});
  }
  return plan;
}

}  // namespace kpc::ipvs
