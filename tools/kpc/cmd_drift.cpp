// `kpc drift SNAPSHOT... --state NODE_SAVE [-o REPAIR]`: does the node do what
// kube-proxy would make it do? Only kube-proxy's part is compared (its chains, stale
// per-service chains, its jumps from the built-in chains); foreign chains and rules
// are ignored. The report: missing/extra/changed rules and stale chains, then the
// packet-level consequence by Service with witnesses (applier/core/drift.h).
// Exit 0 no drift, 1 drift, 2 error.
#include <cstdio>

#include "applier/core/drift_report.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/capabilities.h"
#include "compiler/driver/input_kind.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/drift_nft.h"
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

// The mode, decided once (compiler/driver/input_kind.h): --backend, else the node state's
// content, else the snapshot's KubeProxyConfiguration.mode. nullopt with the reason printed.
std::optional<BackendKind> decide_mode(DriftCliOptions& o, bool flavor_given) {
  if (o.backend == "fastpath" || o.backend == "ipvs") {
    print_error(refusal("drift", o.backend, kNodeState));
    return std::nullopt;
  }
  InputEvidence ev;
  InputError ie;
  if (!classify_input(o.state, o.max_input_size, &ev, &ie)) {
    print_input_error(ie);
    return std::nullopt;
  }
  if (ev.directory) {  // an IPVS node's four dumps (ipvs.save, ipvs.stats, ipset.save, iptables.save)
    print_error(refusal("drift", "ipvs", kNodeState) + "\n  --state " + ev.name + " is a directory");
    return std::nullopt;
  }
  if (ev.kind == InputKind::Snapshot || ev.kind == InputKind::IpvsProgramSet) {
    print_error("error[E0704]: kpc drift: --state " + ev.where() + " is " + input_kind_phrase(ev.kind) +
                ", not a node's state: give iptables-save output, or `nft list ruleset` for an nftables node");
    return std::nullopt;
  }
  ModeDecision d;
  if (!resolve_command_mode("kpc drift", o.backend, o.backend_given, &o.flavor, flavor_given, {ev}, false, &d))
    return std::nullopt;
  if (d.mode) return d.mode;
  auto mode = snapshot_mode(o.inputs[0], o.max_input_size, o.node).value_or(BackendKind::IPTables);
  if (mode == BackendKind::IPVS) {
    print_error(refusal("drift", "ipvs", kNodeState) + "\n  the snapshot's KubeProxyConfiguration.mode is ipvs");
    return std::nullopt;
  }
  return mode;
}

int run(DriftCliOptions& o, bool flavor_given) {
  auto mode = decide_mode(o, flavor_given);
  if (!mode) return kExitError;
  if (*mode == BackendKind::NFTables) {
    if (!o.ipsets.empty() || flavor_given) {
      print_error("kpc drift: --ipsets and --flavor are for iptables nodes (an nftables node's sets are in its tables)");
      return kExitError;
    }
    NftDriftRequest r;
    r.inputs = o.inputs;
    r.state = o.state;
    r.output = o.output;
    r.format = o.format;
    r.local_addresses = o.local_addresses;
    r.max_input_size = o.max_input_size;
    r.max_atoms = o.max_atoms;
    r.node = o.node;
    r.verbose = o.verbose;
    return run_drift_nft(r);
  }
  if (o.backend == "nftables") o.backend = "iptables";
  o.backend_given = true;  // decided: the snapshot is compiled with it whatever its configuration says
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
      "(its chains and its jumps from the built-in chains; foreign rules ignored), or of an nftables node's "
      "listing (its kube-proxy tables; other tables ignored), with a full sync of the snapshot, then what that "
      "changes for packets, by Service (exit 0 no drift, 1 drift, 2 error)");
  cmd->add_option("snapshot", o->inputs, "snapshot files or directories")->required();
  cmd->add_option("--state", o->state,
                  "the node's iptables-save output, or for an nftables node `nft list ruleset` / `nft list table ip "
                  "kube-proxy` ('-' for stdin)")
      ->required();
  cmd->add_option("-o,--output", o->output,
                  "write the smallest repair program (iptables-restore --noflush input) to this file; empty when "
                  "there is no drift");
  cmd->add_option("--backend", o->backend,
                  "iptables, ip6tables or nftables (default: told from the state's content, else the snapshot's mode)")
      ->check(CLI::IsMember({"iptables", "ip6tables", "nftables", "fastpath", "ipvs"}))
      ->capture_default_str();
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
      "  nft list ruleset > node.nft && kpc drift cluster/ --state node.nft -o repair.nft   an nftables node\n"
      "Exit codes: 0 no drift, 1 drift (repair written with -o), 2 error, 3 internal error.");
  cmd->callback([cmd, o, &exit_code] {
    if (o->verbose && o->format != "text") throw_verbose_needs_text();
    o->backend_given = cmd->count("--backend") > 0;
    exit_code = run(*o, cmd->count("--flavor") > 0);
  });
}

}  // namespace kpc::cli
