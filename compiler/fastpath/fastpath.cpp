#include "compiler/fastpath/fastpath.h"

#include "compiler/nftables/names.h"

#include <algorithm>
#include <cstdio>

namespace kpc::fastpath {
namespace {

constexpr const char* kFlowtable = "fastpath";
constexpr const char* kNodePorts = "service-nodeports";
constexpr const char* kIp4Ports = "service-ip4-ports";
constexpr const char* kIp6Ports = "service-ip6-ports";
constexpr const char* kMarkChain = "fastpath-mark";
constexpr const char* kOffloadChain = "fastpath";

std::string hex8(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

void add_port_elements(const Service& svc, Desired& d) {
  // Which VIPs route to this node: the cluster IPs, external IPs, and load-balancer ingress
  // IPs kube-proxy programs (not those with ipMode Proxy, whose traffic arrives addressed to
  // the node or a pod).
  std::vector<IPAddr> vips = svc.cluster_ips;
  vips.insert(vips.end(), svc.external_ips.begin(), svc.external_ips.end());
  for (const auto& in : svc.load_balancer_ingress)
    if (in.ip && !(in.ip_mode && *in.ip_mode == LoadBalancerIPMode::Proxy)) vips.push_back(*in.ip);
  for (const auto& p : svc.ports) {
    // Flowtables offload TCP and UDP only.
    if (p.protocol != Protocol::TCP && p.protocol != Protocol::UDP) continue;
    const char* proto = protocol_lower(p.protocol);
    for (const auto& ip : vips) {
      std::string e = std::string(proto) + " . " + ip.str() + " . " + std::to_string(p.port);
      (ip.family == IPFamily::V4 ? d.ip4_ports : d.ip6_ports).insert(std::move(e));
    }
    if (p.node_port != 0) d.nodeports.insert(std::string(proto) + " . " + std::to_string(p.node_port));
  }
}

}  // namespace

std::optional<Desired> desired_state(const Snapshot& snap, DiagSink& diags) {
  Desired d;
  bool ok = true;
  // kube-proxy's masquerade mark must not be the fast-path mark: clearing the bit after
  // offload would clear the masquerade decision too.
  bool nft_mode = snap.config.mode == ProxyMode::NFTables;
  int32_t bit = nft_mode ? snap.config.nftables.masquerade_bit : snap.config.iptables.masquerade_bit;
  if (bit == static_cast<int32_t>(kMarkBit)) {
    const char* field = nft_mode ? "nftables.masqueradeBit" : "iptables.masqueradeBit";
    Pos at = snap.config.fields.at(field);
    diags.report(DiagCode::InvalidConfig, at.known() ? at : snap.config.pos, "KubeProxyConfiguration", field,
                 "15 is the fast path's mark bit (0x8000, KEP-4963): kube-proxy's masquerade mark must be another bit");
    ok = false;
  }
  if (!snap.env.interfaces_set) {
    diags.report(DiagCode::InvalidConfig, snap.env.pos, "NodeEnvironment", "interfaces",
                 "the fast path's flowtable is bound to the node's interfaces: list them in NodeEnvironment.interfaces");
    ok = false;
  }
  for (size_t i = 0; i < snap.env.interfaces.size(); ++i) {
    const auto& itf = snap.env.interfaces[i];
    if (itf.name == "lo") continue;  // loopback traffic never reaches the forward hook
    if (!nftables::is_nft_word(itf.name)) {  // devices are written unquoted, as knftables does
      std::string path = "interfaces[" + std::to_string(i) + "].name";
      Pos at = snap.env.fields.at(path);
      diags.report(DiagCode::InvalidConfig, at.known() ? at : snap.env.pos, "NodeEnvironment", path,
                   "\"" + itf.name + "\": flowtable devices are written unquoted; only letters, digits, '-', '_' and '.'");
      ok = false;
      continue;
    }
    d.devices.push_back(itf.name);
  }
  if (ok && d.devices.empty()) {
    diags.report(DiagCode::InvalidConfig, snap.env.pos, "NodeEnvironment", "interfaces",
                 "no interface but lo: a flowtable needs at least one device");
    ok = false;
  }
  for (const auto& svc : snap.services) {
    if (!svc.traffic_hint_long_lived || !svc.proxy_name().empty()) continue;
    if (svc.effective_type() == ServiceType::ExternalName || svc.cluster_ips.empty()) continue;  // headless, ExternalName
    add_port_elements(svc, d);
  }
  if (!ok) return std::nullopt;
  return d;
}

namespace {

void add_flowtable(nftables::Transaction& tx, const Desired& d) {
  std::string devices;
  for (const auto& dev : d.devices) devices += (devices.empty() ? "" : ", ") + dev;
  nftables::Operation op;
  op.kind = nftables::ObjectKind::Flowtable;
  op.name = kFlowtable;
  std::string body = "hook ingress priority filter ; devices = { " + devices + " } ;";
  op.body = body;
  tx.append(op);
}

void write_chains(nftables::Transaction& tx) {
  const std::string mark = hex8(1u << kMarkBit);
  tx.add_chain(kMarkChain, nftables::BaseChainSpec{"filter", "prerouting", -110});  // dstnat - 10: before DNAT
  tx.flush_chain(kMarkChain);
  tx.add_rule(kMarkChain, std::string("meta l4proto . th dport @") + kNodePorts + " meta mark set meta mark | " + mark);
  tx.add_rule(kMarkChain,
              std::string("meta l4proto . ip daddr . th dport @") + kIp4Ports + " meta mark set meta mark | " + mark);
  tx.add_rule(kMarkChain,
              std::string("meta l4proto . ip6 daddr . th dport @") + kIp6Ports + " meta mark set meta mark | " + mark);
  tx.add_chain(kOffloadChain, nftables::BaseChainSpec{"filter", "forward", 0});
  tx.flush_chain(kOffloadChain);
  // The KEP writes `meta mark 0x00008000`, which matches only when no other bit is set (a
  // masqueraded packet, 0x4000 | 0x8000, would never be offloaded), and clears with
  // `& 0x00007fff`, which also clears bits 16-31 other components use; kpc tests the bit and
  // clears only it (docs/fastpath.md).
  tx.add_rule(kOffloadChain, "meta mark & " + mark + " == " + mark + " flow add @" + kFlowtable);
  tx.add_rule(kOffloadChain, "meta mark set meta mark & " + hex8(~(1u << kMarkBit)));
}

void fill(nftables::Transaction& tx, const char* set, const std::set<std::string>& elements) {
  for (const auto& e : elements) tx.add_element(false, set, e);
}

void diff(nftables::Transaction& tx, const char* set, const std::set<std::string>& before,
          const std::set<std::string>& after) {
  for (const auto& e : before)
    if (!after.count(e)) tx.delete_element(false, set, e);
  for (const auto& e : after)
    if (!before.count(e)) tx.add_element(false, set, e);
}

}  // namespace

nftables::Transaction fastpath_transaction(const Desired& next, const Desired* prior) {
  nftables::Transaction tx;
  tx.family = nftables::TableFamily::Inet;
  tx.table = kTable;
  if (!prior) {
    tx.add_table(std::nullopt);
    add_flowtable(tx, next);
    tx.add_set(false, kNodePorts, "inet_proto . inet_service");
    tx.flush_set(false, kNodePorts);
    tx.add_set(false, kIp4Ports, "inet_proto . ipv4_addr . inet_service");
    tx.flush_set(false, kIp4Ports);
    tx.add_set(false, kIp6Ports, "inet_proto . ipv6_addr . inet_service");
    tx.flush_set(false, kIp6Ports);
    write_chains(tx);
    fill(tx, kNodePorts, next.nodeports);
    fill(tx, kIp4Ports, next.ip4_ports);
    fill(tx, kIp6Ports, next.ip6_ports);
    return tx;
  }
  if (prior->devices != next.devices) {
    // A flowtable's devices cannot be replaced in place: drop the rule that references it,
    // recreate it, write the rule again.
    tx.flush_chain(kOffloadChain);
    nftables::Operation del;
    del.verb = nftables::Verb::Delete;
    del.kind = nftables::ObjectKind::Flowtable;
    del.name = kFlowtable;
    tx.append(del);
    add_flowtable(tx, next);
    write_chains(tx);
  }
  diff(tx, kNodePorts, prior->nodeports, next.nodeports);
  diff(tx, kIp4Ports, prior->ip4_ports, next.ip4_ports);
  diff(tx, kIp6Ports, prior->ip6_ports, next.ip6_ports);
  return tx;
}

}  // namespace kpc::fastpath
