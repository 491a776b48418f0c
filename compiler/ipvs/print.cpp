#include "compiler/ipvs/print.h"

#include <stdexcept>

#include "compiler/ir/printer.h"

namespace kpc::ipvs {

namespace {

// The plan's "#" lines carry Service names (DNS labels, checked by the loader); a reason
// that could end the comment line is a bug, refused loudly as the iptables printer does.
void reason_line(std::string& out, const std::string& reason) {
  for (char c : reason)
    if (c == '\n' || c == '\r' || static_cast<unsigned char>(c) < 0x20) throw std::logic_error("unsafe plan text");
  out += "# ";
  out += reason;
  out += '\n';
}

void plan_lines(std::string& out, const std::vector<PlanLine>& lines) {
  for (const auto& l : lines) {
    reason_line(out, l.reason);
    if (!l.line.empty()) {
      out += l.line;
      out += '\n';
    }
  }
}

}  // namespace

const char* protocol_option(Protocol p) {
  return p == Protocol::TCP ? "-t" : p == Protocol::UDP ? "-u" : "--sctp-service";
}

std::string ipset_create_line(const IpSet& s, IPFamily family) {
  // kube-proxy's create arguments (utilipset.createSet): family, hashsize and maxelem for
  // the hash types, the port range for bitmap:port.
  std::string out = "create " + s.name + " " + set_type_name(s.type);
  if (s.type == SetType::BitmapPort)
    out += " range 0-65535";
  else
    out += std::string(" family ") + (family == IPFamily::V4 ? "inet" : "inet6") + " hashsize 1024 maxelem 65536";
  out += " -exist\n";
  return out;
}

std::string host_port(const IPAddr& ip, uint16_t port) {
  std::string s;
  if (ip.family == IPFamily::V6) s += '[';
  s += ip.str();
  if (ip.family == IPFamily::V6) s += ']';
  s += ':';
  s += std::to_string(port);
  return s;
}

std::string print_ipvsadm(const Program& prog) {
  std::string out;
  for (const auto& vs : prog.virtual_servers) {
    std::string svc = std::string(protocol_option(vs.protocol)) + " " + host_port(vs.address, vs.port);
    // ipvsadm 1.31's rule format: "-A %s -s %s", then " -p %u" (no -M: kube-proxy's netmask is
    // the full /32 or /128), then " -b " and the scheduler's flags.
    out += "-A " + svc + " -s " + vs.scheduler;
    if (vs.persistent) out += " -p " + std::to_string(vs.timeout);
    if (vs.source_port_hash) out += " -b mh-port";
    out += '\n';
    for (const auto& rs : vs.real_servers)
      out += "-a " + svc + " -r " + host_port(rs.address, rs.port) + " -m -w " + std::to_string(rs.weight) + "\n";
  }
  return out;
}

std::string print_ipsets(const Program& prog) {
  std::string out;
  for (const auto& s : prog.sets) {
    out += "# ";
    out += s.comment;
    out += '\n';
    out += ipset_create_line(s, prog.family);
    out += "flush " + s.name + "\n";
    for (const auto& e : s.entries) out += "add " + s.name + " " + e + "\n";
  }
  return out;
}

std::string print_iptables(const Program& prog) { return ir::print_program(prog.iptables); }

std::string print_node_plan(const NodePlan& plan, const Program& prog, const std::string& node_name) {
  std::string out;
  reason_line(out, std::string("kpc node plan: what kube-proxy's IPVS proxier (") +
                       (prog.family == IPFamily::V4 ? "IPv4" : "IPv6") + ") sets up on node " + node_name +
                       " besides ipvs.rules, ipset.rules and iptables.rules");
  out += '\n';
  plan_lines(out, plan.device);
  out += '\n';
  reason_line(out, "sysctls (sysctl.conf syntax), set when kube-proxy starts");
  plan_lines(out, plan.sysctls);
  if (!plan.timeouts.empty()) {
    out += '\n';
    plan_lines(out, plan.timeouts);
  }
  return out;
}

}  // namespace kpc::ipvs
