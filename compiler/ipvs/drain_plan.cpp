#include "compiler/ipvs/drain_plan.h"

#include <charconv>
#include <map>
#include <tuple>

#include "compiler/ipvs/print.h"

namespace kpc::ipvs {

namespace {

constexpr std::string_view kPrefix = "net.ipv4.vs.";

bool draining(RsFate f) { return f == RsFate::Draining || f == RsFate::StillDraining; }
// Deleted while connections may still use it: their next packets find no server.
bool cut(const DrainServer& s) {
  return !draining(s.fate) && s.fate != RsFate::DeletedIdle && (!s.connections || *s.connections > 0);
}

std::string counts(const DrainServer& s) {
  if (!s.connections) return "counts not read, taken as live";
  if (s.active && s.inactive)
    return std::to_string(*s.active) + " active, " + std::to_string(*s.inactive) + " inactive";
  return std::to_string(*s.connections) + " connections";
}

// "10.244.9.9:53 (2 active, 0 inactive), ..." for the servers pred selects.
template <class Pred>
std::string list(const DrainService& svc, Pred pred) {
  std::string out;
  for (const auto& s : svc.servers)
    if (pred(s)) out += (out.empty() ? "" : ", ") + host_port(s.address, s.port) + " (" + counts(s) + ")";
  return out;
}

void warn_draining(DrainService& svc, const KernelVersion& k, const IpvsSysctls& s) {
  std::string who = list(svc, [](const DrainServer& d) { return draining(d.fate); });
  if (who.empty()) return;
  const int crm = s.conn_reuse_mode.value_or(0);  // no sysctl (< 4.1): the kernel never reschedules
  const std::string mode = s.conn_reuse_mode ? "conn_reuse_mode = " + std::to_string(crm)
                                             : "no conn_reuse_mode (kernel < 4.1)";
  if (crm == 0) {
    svc.warnings.push_back(
        {"reused_port_to_draining_server",
         mode + ": a client that reuses the source port of a connection to " + who +
             " is sent to that weight-0 server again, not rescheduled; while such clients keep coming its counts "
             "never reach 0 and kube-proxy never deletes it (graceful termination does not finish)",
         "seed " + std::string(kSeed) + ": with conn_reuse_mode 0 IPVS delivers a reused port's new connection to "
         "the old real server, and weight 0 does not trigger expire_nodest_conn, so the draining server keeps "
         "getting new connections"});
    return;
  }
  if (s.expire_nodest_conn == 0) {
    svc.warnings.push_back(
        {"reused_port_not_rescheduled",
         mode + " with expire_nodest_conn = 0: weight 0 is no reason to reschedule; only a reused port whose old "
             "connection to " + who + " is in TIME_WAIT is rescheduled, any other reuse reaches the draining server",
         "seed " + std::string(kSeed) + ": ip_vs_in reschedules a reused port when expire_nodest_conn is on and the "
         "server's weight is 0, or when the old connection may be reused (TIME_WAIT, is_new_conn_expected)"});
  }
  if (s.conntrack != 0 && k < KernelVersion{5, 9, 0}) {
    svc.warnings.push_back(
        {"syn_dropped_1s",
         mode + ", conntrack = 1, kernel < 5.9: a new SYN from a reused source port that matches a connection to " +
             who + " is rescheduled, but IPVS drops that first SYN; the client connects only after its SYN "
             "retransmission, about 1 s later",
         "seed " + std::string(kSeed) + ": when ip_vs_in reschedules a connection that uses conntrack it returns "
         "NF_DROP for the SYN (kube-proxy needs net.ipv4.vs.conntrack = 1 for its iptables MASQUERADE), so the "
         "client retransmits after 1 s; fixed in kernel 5.9 (kubernetes#93297)"});
  }
}

void warn_cut(DrainService& svc, const IpvsSysctls& s) {
  std::string who = list(svc, cut);
  if (who.empty()) return;
  if (s.expire_nodest_conn != 0) {
    svc.warnings.push_back(
        {"connections_expire_on_deleted_server",
         "deleted with live connections: " + who + "; with expire_nodest_conn = 1 the next packet of each expires "
             "it and is dropped: a TCP client sees its connection end and reconnects, a UDP client loses that "
             "datagram and the next is scheduled anew",
         "seed " + std::string(kSeed) + ": with expire_nodest_conn on, a packet whose destination server is no "
         "longer available expires its connection at once (ip_vs_conn_expire_now) and the client must reconnect"});
  } else {
    svc.warnings.push_back(
        {"deleted_server_blackholes",
         "deleted with live connections: " + who + "; with expire_nodest_conn = 0 IPVS drops their packets silently "
             "until the connection entries time out, and a client reusing such a source port gets no answer meanwhile",
         "seed " + std::string(kSeed) + ": expire_nodest_conn 0 (the kernel's default) makes the load balancer "
         "silently drop packets when their destination server is not available"});
  }
}

}  // namespace

IpvsSysctls sysctls_from_plan(const NodePlan& plan, const KernelVersion& kernel) {
  IpvsSysctls s;
  if (kernel >= KernelVersion{4, 1, 0}) s.conn_reuse_mode = 1;  // the kernel's default
  for (const auto& l : plan.sysctls) {
    if (l.line.empty()) continue;
    std::string error;
    std::string a = l.line;
    for (size_t i; (i = a.find(' ')) != std::string::npos;) a.erase(i, 1);
    if (a.rfind(kPrefix, 0) == 0) apply_sysctl(a, &s, &error);  // other sysctls (ip_forward, arp) do not matter
  }
  return s;
}

bool apply_sysctl(std::string_view a, IpvsSysctls* s, std::string* error) {
  size_t eq = a.find('=');
  std::string_view name = a.substr(0, eq), value = eq == std::string_view::npos ? "" : a.substr(eq + 1);
  int v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (eq == std::string_view::npos || value.empty() || ec != std::errc() || end != value.data() + value.size() ||
      v < 0) {
    *error = "not NAME=VALUE with a non-negative integer value";
    return false;
  }
  if (name.rfind(kPrefix, 0) == 0) name.remove_prefix(kPrefix.size());
  if (name == "conn_reuse_mode") s->conn_reuse_mode = v;
  else if (name == "expire_nodest_conn") s->expire_nodest_conn = v;
  else if (name == "conntrack") s->conntrack = v;
  else {
    *error = "not one of net.ipv4.vs.conn_reuse_mode, net.ipv4.vs.expire_nodest_conn, net.ipv4.vs.conntrack";
    return false;
  }
  return true;
}

DrainPlan drain_plan(const Program& full, const std::vector<RemovedRealServer>& removed, const KernelVersion& kernel,
                     const std::string& kernel_release, const IpvsSysctls& sysctls) {
  DrainPlan plan;
  plan.kernel = kernel_release;
  plan.sysctls = sysctls;
  using Key = std::tuple<Protocol, IPAddr, uint16_t>;
  std::map<Key, const VirtualServer*> wanted;
  for (const auto& vs : full.virtual_servers) wanted[{vs.protocol, vs.address, vs.port}] = &vs;
  std::map<Key, size_t> index;
  for (const auto& r : removed) {
    Key k{r.protocol, r.vs_address, r.vs_port};
    auto [it, fresh] = index.try_emplace(k, plan.services.size());
    if (fresh) {
      DrainService svc;
      if (auto w = wanted.find(k); w != wanted.end()) {
        svc.service = w->second->service_port;
        svc.kind = vs_kind_name(w->second->kind);
      }
      svc.protocol = r.protocol;
      svc.address = r.vs_address;
      svc.port = r.vs_port;
      plan.services.push_back(std::move(svc));
    }
    const auto& s = r.server;
    plan.services[it->second].servers.push_back(
        {s.address, s.port, s.weight, r.fate, s.active, s.inactive, s.connections});
    plan.draining |= draining(r.fate);
  }
  for (auto& svc : plan.services) {
    if (svc.protocol == Protocol::TCP) warn_draining(svc, kernel, sysctls);
    warn_cut(svc, sysctls);
    plan.warnings += svc.warnings.size();
  }
  return plan;
}

}  // namespace kpc::ipvs
