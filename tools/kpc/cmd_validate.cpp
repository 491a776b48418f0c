// `kpc validate FILE...`: load and validate a snapshot, print a summary.
#include <cstdio>
#include <string>
#include <vector>

#include "compiler/model/loader.h"
#include "compiler/proxy/service_ports.h"
#include "tools/kpc/commands.h"

namespace kpc::cli {
namespace {

struct ValidateOptions {
  std::vector<std::string> inputs;
  bool verbose = false;
  bool quiet = false;
  uint64_t max_input_size = kDefaultMaxInputSize;
  std::string node;  ///< --node
  std::string format = "text";
};

// Endpoints are counted as the compiler uses them: per Service port, merged from the slices
// kube-proxy reads (FQDN, orphan and unlabelled slices, and slice ports that match no Service
// port, are not: see the W0005-W0007 warnings).
std::string summary(const Snapshot& s) {
  size_t v4 = proxy::count_service_endpoints(s, IPFamily::V4), v6 = proxy::count_service_endpoints(s, IPFamily::V6);
  std::string out = std::to_string(s.services.size()) + " Services, " + std::to_string(s.slices.size()) +
                    " EndpointSlices (" + std::to_string(v4 + v6) + " endpoints of Service ports: " +
                    std::to_string(v4) + " IPv4, " + std::to_string(v6) + " IPv6), " +
                    std::to_string(s.nodes.size()) + " Nodes";
  if (s.config.present) out += ", KubeProxyConfiguration";
  if (s.env.present) out += ", NodeEnvironment";
  return out;
}

// kpc.dev/validate/v1: the counts of summary() as numbers (schemas/output/validate.schema.json).
nlohmann::ordered_json validate_json(const Snapshot& s, bool valid) {
  auto j = json_document("validate");
  j["valid"] = valid;
  if (!valid) return j;
  size_t v4 = proxy::count_service_endpoints(s, IPFamily::V4), v6 = proxy::count_service_endpoints(s, IPFamily::V6);
  j["services"] = s.services.size();
  j["endpoint_slices"] = s.slices.size();
  j["endpoints"] = {{"ipv4", v4}, {"ipv6", v6}};
  j["nodes"] = s.nodes.size();
  j["kube_proxy_configuration"] = s.config.present;
  j["node_environment"] = s.env.present;
  j["skipped_kinds"] = nlohmann::ordered_json::object();
  for (const auto& [kind, n] : s.skipped_kinds) j["skipped_kinds"][kind] = n;
  return j;
}

int run(const ValidateOptions& o) {
  if (refuse_non_snapshots("validate", o.inputs, o.max_input_size)) return kExitError;
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  lo.node_name = o.node;
  bool ok = load_snapshot(o.inputs, lo, sm, &snap, diags);
  print_diagnostics(diags, sm);
  if (o.format == "json") {
    print_json(validate_json(snap, ok));
    return ok ? kExitOk : kExitError;
  }
  if (!ok) {
    std::fprintf(stderr, "kpc validate: %zu error(s)\n", diags.error_count());
    return kExitError;
  }
  if (!o.quiet) std::printf("valid: %s\n", summary(snap).c_str());
  if (o.verbose)
    for (const auto& [kind, n] : snap.skipped_kinds) std::printf("skipped: %zu %s (kind not read by kpc)\n", n, kind.c_str());
  return kExitOk;
}

}  // namespace

void add_validate(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ValidateOptions>();
  CLI::App* cmd = app.add_subcommand("validate", "Load and validate a cluster snapshot (exit 0 valid, 2 invalid)");
  cmd->add_option("inputs", opts->inputs, "snapshot files or directories (YAML, JSON, kind: List; '-' for stdin)")
      ->required();
  cmd->add_flag("-v,--verbose", opts->verbose, "also count the objects of kinds kpc skips");
  cmd->add_flag("-q,--quiet", opts->quiet, "print nothing on success");
  add_max_input_size_option(cmd, opts->max_input_size);
  add_node_option(cmd, opts->node);
  cmd->add_option("--format", opts->format,
                  "text, or json (kpc.dev/validate/v1: counts and every diagnostic, also when invalid)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  kubectl get svc,endpointslices,nodes -A -o yaml > cluster.yaml && kpc validate cluster.yaml kube-proxy.yaml\n"
      "  kpc validate cluster/ --format json             counts and diagnostics as one JSON document\n"
      "Exit codes: 0 valid, 2 invalid (located errors on stderr).");
  cmd->callback([opts, &exit_code] {
    // Flags that would be ignored are errors: the document always has the counts and skipped kinds.
    if (opts->format == "json" && (opts->quiet || opts->verbose))
      throw CLI::ValidationError("--format json", "--quiet and --verbose are for --format text");
    exit_code = run(*opts);
  });
}

}  // namespace kpc::cli
