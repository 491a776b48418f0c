// `kpc drift SNAPSHOT... --state NODE_SAVE [-o REPAIR]`: does the node do what
// kube-proxy would make it do? Only kube-proxy's part is compared (its chains, stale
// per-service chains, its jumps from the built-in chains); foreign chains and rules
// are ignored. The report: missing/extra/changed rules and stale chains, then the
// packet-level consequence by Service with witnesses (applier/core/drift.h).
// Exit 0 no drift, 1 drift, 2 error.
#include <cstdio>

#include "applier/core/drift_report.h"
#include "compiler/driver/compile.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/text_layout.h"

namespace kpc::cli {
namespace {

struct DriftCliOptions {
  std::vector<std::string> inputs;
  std::string state;
  std::string output;
  std::string backend = "iptables";
  std::string flavor = "legacy";
  std::string format = "text";
  std::vector<std::string> local_addresses;
  uint64_t max_input_size = kDefaultMaxInputSize;
  bool backend_given = false;
  std::string ipsets;
  size_t max_atoms = 2000;
  std::string node;  ///< --node
  bool verbose = false;
};

int run(const DriftCliOptions& o) {
  Backend backend = *backend_from_name(o.backend);
  IPFamily family = backend_family(backend);
  auto flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  SourceManager sm;
  DiagSink diags;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  lo.node_name = o.node;
  Snapshot snap;
  std::optional<CompileResult> full;
  if (load_snapshot(o.inputs, lo, sm, &snap, diags) && check_configured_mode(snap, o.backend_given, backend, diags))
    full = compile_iptables(snap, backend, {}, diags);
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (!full) return kExitError;
  verifier::RulesetState actual;
  std::string error;
  if (!read_state(o.state, family, flavor, o.max_input_size, &actual, &error)) {
    print_error(error);
    return kExitError;
  }
  std::vector<IPAddr> derived, local;
  append_node_addresses(snap, family, &derived);
  if (!choose_local_addresses(o.local_addresses, derived, family, "drift", &local)) return kExitError;

  verifier::ipset::Table sets;
  if (!o.ipsets.empty() && !read_ipsets(o.ipsets, o.max_input_size, &sets)) return kExitError;
  applier::DriftOptions dopt;
  dopt.flavor = flavor;
  if (!o.ipsets.empty()) dopt.ipsets = &sets;
  dopt.max_atoms = o.max_atoms;
  dopt.local_addresses = local;
  applier::DriftReport rep = applier::check_drift(actual, full->text, dopt);
  if (!rep.ok) {
    print_error("error[E0900]: " + o.state + ": " + rep.error);
    return kExitError;
  }
  applier::DriftReportContext ctx;
  ctx.snapshot = o.inputs[0] + (o.inputs.size() > 1 ? " (+" + std::to_string(o.inputs.size() - 1) + ")" : "");
  ctx.state = o.state;
  ctx.backend = o.backend;
  ctx.flavor = o.flavor;
  ctx.local_addresses = local;
  ctx.verbose = o.verbose;
  std::string report = o.format == "json"       ? applier::drift_json(rep, ctx)
                       : o.format == "markdown" ? applier::drift_markdown(rep, ctx)
                       : o.verbose              ? applier::drift_text(rep, ctx)
                                                : reviewer_text(applier::drift_text(rep, ctx));
  if (!o.output.empty() && !write_output(o.output, rep.repair)) return kExitError;
  if (o.format == "json")
    print_json_text(report);
  else if (!write_output("", report))
    return kExitError;
  if (!rep.packets.self_check_failures.empty()) return kExitInternal;
  return rep.drift() ? kExitDifferent : kExitOk;
}

}  // namespace

void add_drift(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DriftCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "drift",
      "Does the node do what kube-proxy would make it do? Compares kube-proxy's part of an iptables-save dump "
      "(its chains and its jumps from the built-in chains; foreign rules ignored) with a full sync of the snapshot, "
      "then what that changes for packets, by Service (exit 0 no drift, 1 drift, 2 error)");
  cmd->add_option("snapshot", o->inputs, "snapshot files or directories")->required();
  cmd->add_option("--state", o->state, "the node's iptables-save output ('-' for stdin)")->required();
  cmd->add_option("-o,--output", o->output,
                  "write the smallest repair program (iptables-restore --noflush input) to this file; empty when "
                  "there is no drift");
  add_backend_option(cmd, o->backend);
  add_flavor_option(cmd, o->flavor, "legacy or nft (how the node's iptables-restore behaves)");
  cmd->add_option("--format", o->format, "text, json or markdown")
      ->check(CLI::IsMember({"text", "json", "markdown"}))
      ->capture_default_str();
  cmd->add_option("--local-address", o->local_addresses, "the node's addresses (default: the snapshot's Node)");
  add_max_input_size_option(cmd, o->max_input_size);
  add_node_option(cmd, o->node);
  add_ipsets_option(cmd, o->ipsets);
  cmd->add_flag("-v,--verbose", o->verbose,
                "also every rule of the chains that differ, the comparison's own words and rule paths, at full width "
                "(default: a reviewer's text, lines of at most 100 columns)");
  cmd->add_option("--max-atoms", o->max_atoms,
                  "destination atoms explored for the packet-level consequence; beyond, an evenly spread sample "
                  "(0: all; the drift verdict comes from the chains either way)")
      ->check(cli_checks::whole_number_at_least(0))
      ->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  iptables-save > node.save && kpc drift cluster/ --state node.save -o repair.restore\n"
      "  kpc drift cluster/ --state node.save --ipsets <(ipset save) --format markdown\n"
      "Exit codes: 0 no drift, 1 drift (repair written with -o), 2 error, 3 internal error.");
  cmd->callback([cmd, o, &exit_code] {
    if (o->verbose && o->format != "text") throw_verbose_needs_text();
    o->backend_given = cmd->count("--backend") > 0;
    exit_code = run(*o);
  });
}

}  // namespace kpc::cli
