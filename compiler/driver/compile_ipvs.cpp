#include "compiler/driver/compile_ipvs.h"

#include "compiler/driver/compile.h"
#include "compiler/ipvs/lower.h"
#include "compiler/ipvs/print.h"
#include "compiler/proxy/service_ports.h"

namespace kpc {

namespace {
int64_t seconds(Duration d) { return d.ns / 1'000'000'000; }
}  // namespace

std::optional<IpvsCompileResult> compile_ipvs(const Snapshot& snap, IPFamily family, DiagSink& diags) {
  // The IPVS proxier takes masqueradeAll and masqueradeBit from the iptables section, as
  // the iptables back end does (kube-proxy's server_linux.go).
  auto node = node_context_for(snap, family == IPFamily::V4 ? Backend::IPTables : Backend::IP6Tables, diags);
  if (!node) return std::nullopt;
  auto ports = proxy::build_service_ports(snap, *node);
  ipvs::LowerOptions lo;
  if (!snap.config.ipvs.scheduler.empty()) lo.scheduler = snap.config.ipvs.scheduler;
  lo.node_addresses = ipvs::node_address_set(snap, *node);
  IpvsCompileResult r;
  r.program = ipvs::lower_ipvs(ports, *node, lo);
  r.program.exclude_cidrs = snap.config.ipvs.exclude_cidrs;  // for a sync from the node's state
  ipvs::PlanInput pi;
  pi.kernel_release = snap.env.kernel_version;
  pi.strict_arp = snap.config.ipvs.strict_arp;
  pi.tcp_timeout_s = seconds(snap.config.ipvs.tcp_timeout);
  pi.tcp_fin_timeout_s = seconds(snap.config.ipvs.tcp_fin_timeout);
  pi.udp_timeout_s = seconds(snap.config.ipvs.udp_timeout);
  r.plan = ipvs::node_plan(r.program, pi);
  r.ipvs_rules = ipvs::print_ipvsadm(r.program);
  r.ipset_rules = ipvs::print_ipsets(r.program);
  r.iptables_rules = ipvs::print_iptables(r.program);
  r.node_plan = ipvs::print_node_plan(r.plan, r.program, node->node_name);
  return r;
}

const std::string& ipvs_file_text(const IpvsCompileResult& r, std::string_view file) {
  if (file == "ipvs.rules") return r.ipvs_rules;
  if (file == "ipset.rules") return r.ipset_rules;
  if (file == "iptables.rules") return r.iptables_rules;
  return r.node_plan;
}

}  // namespace kpc
