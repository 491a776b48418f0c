// `kpc ipvs drain-plan SNAPSHOT --prior-state DIR [--kernel-version R] [--sysctl NAME=VALUE]...
//                      [--family ipv4|ipv6] [--format text|json|markdown]` (issue 17 §2):
// what kube-proxy's next IPVS sync from the node's state (the very sync `kpc compile --backend
// ipvs --prior-state` writes, compiler/ipvs/sync.h) leaves draining or deletes, per Service, and
// what a client reusing a source port hits under the node's kernel and IPVS sysctls
// (compiler/ipvs/drain_plan.h, seed 004_098315146610bdd0.txt).
#include <cstdio>
#include <string>
#include <vector>

#include "compiler/driver/compile_ipvs.h"
#include "compiler/ipvs/drain_plan.h"
#include "compiler/ipvs/print.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/ipvs_state.h"

namespace kpc::cli {
namespace {

struct DrainOptions {
  std::vector<std::string> inputs;
  std::string prior_state;
  std::string kernel_version;  ///< --kernel-version: else NodeEnvironment kernel.version
  std::vector<std::string> sysctls;
  std::string family = "ipv4";
  std::string format = "text";
  std::string node;
  uint64_t max_input_size = kDefaultMaxInputSize;
};

std::string opt_count(const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : "?"; }
std::string vs_text(const ipvs::DrainService& s) {
  return std::string(protocol_name(s.protocol)) + " " + ipvs::host_port(s.address, s.port);
}
std::string service_text(const ipvs::DrainService& s) {
  return s.service.empty() ? "(no Service: the virtual server is deleted)" : s.service + " (" + s.kind + ")";
}
std::string sysctl_line(const ipvs::DrainPlan& p) {
  return "conn_reuse_mode=" + (p.sysctls.conn_reuse_mode ? std::to_string(*p.sysctls.conn_reuse_mode) : "none") +
         " expire_nodest_conn=" + std::to_string(p.sysctls.expire_nodest_conn) +
         " conntrack=" + std::to_string(p.sysctls.conntrack);
}

std::string text_report(const ipvs::DrainPlan& p) {
  std::string out = "kernel " + p.kernel + ", net.ipv4.vs: " + sysctl_line(p) + "\n";
  if (p.services.empty()) return out + "nothing draining: the sync removes no real server\n";
  for (const auto& s : p.services) {
    out += "\n" + service_text(s) + ", virtual server " + vs_text(s) + "\n";
    for (const auto& r : s.servers)
      out += "  " + ipvs::host_port(r.address, r.port) + "  weight " + std::to_string(r.weight) + "  " +
             ipvs::rs_fate_name(r.fate) + "  active " + opt_count(r.active) + " inactive " + opt_count(r.inactive) +
             "\n";
    for (const auto& w : s.warnings) out += "  warning[" + w.kind + "]: " + w.message + "\n    why: " + w.seed + "\n";
  }
  return out;
}

std::string markdown_report(const ipvs::DrainPlan& p) {
  std::string out = "# IPVS drain plan\n\nKernel `" + p.kernel + "`, `net.ipv4.vs`: `" + sysctl_line(p) + "`\n";
  if (p.services.empty()) return out + "\nNothing draining: the sync removes no real server.\n";
  for (const auto& s : p.services) {
    out += "\n## " + service_text(s) + "\n\nVirtual server `" + vs_text(s) +
           "`\n\n| real server | weight | fate | active | inactive |\n| --- | --- | --- | --- | --- |\n";
    for (const auto& r : s.servers)
      out += "| `" + ipvs::host_port(r.address, r.port) + "` | " + std::to_string(r.weight) + " | " +
             ipvs::rs_fate_name(r.fate) + " | " + opt_count(r.active) + " | " + opt_count(r.inactive) + " |\n";
    if (!s.warnings.empty()) out += "\n";
    for (const auto& w : s.warnings) out += "- **" + w.kind + "**: " + w.message + " *Why:* " + w.seed + "\n";
  }
  return out;
}

nlohmann::ordered_json opt_json(const std::optional<uint64_t>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json json_report(const DrainOptions& o, const ipvs::DrainPlan& p) {
  auto doc = json_document("ipvs-drain-plan");
  doc["prior_state"] = o.prior_state;
  doc["family"] = o.family;
  doc["kernel"] = p.kernel;
  doc["sysctls"] = {{"conn_reuse_mode", p.sysctls.conn_reuse_mode ? nlohmann::ordered_json(*p.sysctls.conn_reuse_mode)
                                                                   : nlohmann::ordered_json(nullptr)},
                    {"expire_nodest_conn", p.sysctls.expire_nodest_conn},
                    {"conntrack", p.sysctls.conntrack}};
  doc["draining"] = p.draining;
  doc["warnings"] = p.warnings;
  auto services = nlohmann::ordered_json::array();
  for (const auto& s : p.services) {
    nlohmann::ordered_json j;
    j["service"] = s.service.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.service);
    j["kind"] = s.kind.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.kind);
    j["protocol"] = protocol_name(s.protocol);
    j["address"] = s.address.str();
    j["port"] = s.port;
    auto servers = nlohmann::ordered_json::array();
    for (const auto& r : s.servers)
      servers.push_back({{"address", r.address.str()},
                         {"port", r.port},
                         {"weight", r.weight},
                         {"fate", ipvs::rs_fate_name(r.fate)},
                         {"active", opt_json(r.active)},
                         {"inactive", opt_json(r.inactive)},
                         {"connections", opt_json(r.connections)}});
    j["servers"] = std::move(servers);
    auto warnings = nlohmann::ordered_json::array();
    for (const auto& w : s.warnings) warnings.push_back({{"kind", w.kind}, {"message", w.message}, {"seed", w.seed}});
    j["warnings"] = std::move(warnings);
    services.push_back(std::move(j));
  }
  doc["services"] = std::move(services);
  return doc;
}

int run_drain_plan(const DrainOptions& o) {
  const IPFamily family = o.family == "ipv6" ? IPFamily::V6 : IPFamily::V4;
  // Bad command-line values first: nothing is read for a run that cannot succeed.
  if (!o.kernel_version.empty() && !ipvs::valid_kernel_release(o.kernel_version)) {
    print_error("error[E0001]: --kernel-version: not a kernel release (X.Y[.Z][-suffix]): " + o.kernel_version);
    return kExitError;
  }
  ipvs::IpvsSysctls given;  // only to check the values here; applied after the plan's below
  for (const auto& a : o.sysctls) {
    std::string error;
    if (!ipvs::apply_sysctl(a, &given, &error)) {
      print_error("error[E0001]: --sysctl " + a + ": " + error);
      return kExitError;
    }
  }
  SourceManager sm;
  DiagSink diags;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  lo.node_name = o.node;
  Snapshot snap;
  bool ok = load_snapshot(o.inputs, lo, sm, &snap, diags);
  std::optional<IpvsCompileResult> full;
  if (ok) full = compile_ipvs(snap, family, diags);
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (!full) return kExitError;
  ipvs::PriorState prior;
  std::string error;
  if (!read_ipvs_prior_state(o.prior_state, family, o.max_input_size, &prior, &error)) {
    print_error(error);
    return kExitError;
  }
  auto sync = ipvs::sync_from_prior(full->program, prior);
  if (!sync.error.empty()) {
    print_error("error[E0900]: " + o.prior_state + "/ipset.save: " + sync.error);
    return kExitError;
  }
  const std::string release = o.kernel_version.empty() ? snap.env.kernel_version : o.kernel_version;
  auto kernel = ipvs::parse_kernel_version(release).value_or(ipvs::KernelVersion{});
  ipvs::PlanInput pi;
  pi.kernel_release = release;
  auto sysctls = ipvs::sysctls_from_plan(ipvs::node_plan(full->program, pi), kernel);
  for (const auto& a : o.sysctls) ipvs::apply_sysctl(a, &sysctls, &error);  // checked above
  auto plan = ipvs::drain_plan(full->program, sync.removed, kernel, release, sysctls);
  if (o.format == "json") print_json(json_report(o, plan));
  else std::fputs((o.format == "markdown" ? markdown_report(plan) : text_report(plan)).c_str(), stdout);
  return plan.draining || plan.warnings ? kExitDifferent : kExitOk;
}

}  // namespace

void add_ipvs(CLI::App& app, int& exit_code) {
  CLI::App* group = app.add_subcommand("ipvs", "IPVS node tools (issue 17): drain-plan");
  group->require_subcommand(1);
  group->footer(
      "Examples:\n"
      "  kpc ipvs drain-plan cluster/ --prior-state node/   what kube-proxy's next sync drains, and the risks\n"
      "Exit codes: those of the subcommand (drain-plan: 0 nothing draining, 1 draining or a warning, 2 error).");
  auto o = std::make_shared<DrainOptions>();
  CLI::App* cmd = group->add_subcommand(
      "drain-plan", "Per Service, the real servers kube-proxy's next IPVS sync leaves draining or deletes, their "
                    "connections, and what a client reusing a source port hits on this node's kernel");
  cmd->add_option("inputs", o->inputs, "snapshot files or directories")->required();
  cmd->add_option("--prior-state", o->prior_state,
                  "the node's state: a directory with ipvs.save (ipvsadm -S -n) and optionally ipvs.stats "
                  "(ipvsadm -Ln: the connection counts), ipset.save")
      ->required();
  cmd->add_option("--kernel-version", o->kernel_version,
                  "the node's kernel release (default: NodeEnvironment kernel.version)");
  cmd->add_option("--sysctl", o->sysctls,
                  "NAME=VALUE, the node's actual net.ipv4.vs.conn_reuse_mode, expire_nodest_conn or conntrack "
                  "(default: what kube-proxy sets for the kernel, the kernel's default otherwise); repeatable");
  cmd->add_option("--family", o->family, "ipv4 or ipv6")->check(CLI::IsMember({"ipv4", "ipv6"}))->capture_default_str();
  cmd->add_option("--format", o->format, "text, json (kpc.dev/ipvs-drain-plan/v1) or markdown")
      ->check(CLI::IsMember({"text", "json", "markdown"}))
      ->capture_default_str();
  add_max_input_size_option(cmd, o->max_input_size);
  add_node_option(cmd, o->node);
  cmd->footer(
      "Examples:\n"
      "  kpc ipvs drain-plan cluster/ --prior-state node/        node/ holds ipvs.save and ipvs.stats\n"
      "  kpc ipvs drain-plan cluster/ --prior-state node/ --kernel-version 4.19.0 --sysctl "
      "net.ipv4.vs.conn_reuse_mode=1\n"
      "  kpc ipvs drain-plan cluster/ --prior-state node/ --format json\n"
      "Exit codes: 0 nothing draining and no warning, 1 a real server draining or a warning, 2 error (located "
      "diagnostics on stderr; nothing on stdout).");
  cmd->callback([o, &exit_code] { exit_code = run_drain_plan(*o); });
}

}  // namespace kpc::cli
