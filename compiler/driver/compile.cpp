#include "compiler/driver/compile.h"

#include "compiler/ir/printer.h"
#include "compiler/proxy/node_context.h"
#include "compiler/proxy/service_ports.h"

namespace kpc {

std::optional<Backend> backend_from_name(std::string_view name) {
  if (name == "iptables") return Backend::IPTables;
  if (name == "ip6tables") return Backend::IP6Tables;
  return std::nullopt;
}

std::optional<CompileResult> compile_iptables(const Snapshot& snap, Backend backend, const iptables::SyncOptions& opts,
                                              DiagSink& diags) {
  IPFamily family = backend_family(backend);
  auto node = proxy::build_node_context(snap, family, diags);
  if (!node) return std::nullopt;
  bool has_family_address = node->node_ip.has_value();
  for (const auto& ip : node->host_addresses) has_family_address |= !ip.is_loopback();
  if (!has_family_address) {
    diags.report(DiagCode::FamilyUnavailable, snap.config.pos, "", "",
                 std::string("node \"") + node->node_name + "\" has no " + family_name(family) +
                     " address (Node status.addresses or NodeEnvironment.interfaces): kube-proxy would run no " +
                     family_name(family) + " proxier");
    return std::nullopt;
  }
  auto ports = proxy::build_service_ports(snap, *node);
  CompileResult r;
  r.sync = iptables::lower_iptables(ports, *node, opts);
  r.text = ir::print_program(r.sync.program);
  return r;
}

}  // namespace kpc
