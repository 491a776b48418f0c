// `kpc compile SNAPSHOT... [--backend iptables|ip6tables] [-o FILE]
//              [--prior OLD...] [--full] [--stats]`
#include <cstdio>
#include <string>
#include <vector>

#include "applier/core/repair.h"
#include "compiler/driver/compile.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "verifier/trace/tracer.h"

namespace kpc::cli {
namespace {

struct CompileOptions {
  std::vector<std::string> inputs;
  std::vector<std::string> prior;
  std::string prior_state;
  std::string flavor = "legacy";
  std::string backend = "iptables";
  std::string output;
  bool full = false;
  bool stats = false;
  bool backend_given = false;  ///< --backend named: else the snapshot's mode decides
  uint64_t max_input_size = kDefaultMaxInputSize;  ///< every input: snapshots and --prior-state
};

// --prior-state: the node's actual state (iptables-save output or a restore program)
// -> the smallest program that brings it to the full program's state.
int repair_from_state(const CompileOptions& o, const CompileResult& full) {
  auto flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  IPFamily family = o.backend == "ip6tables" ? IPFamily::V6 : IPFamily::V4;
  verifier::RulesetState actual;
  std::string error;
  if (!read_state(o.prior_state, family, flavor, o.max_input_size, &actual, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return kExitError;
  }
  // A node's dump (rules in its built-in chains) must keep kube-proxy's jumps there:
  // one missing is drift the repair puts back. A bare restore program has none by design.
  applier::RepairOptions ro;
  ro.flavor = flavor;
  ro.ensure_jumps = !verifier::trace::builtin_chains_empty(actual);
  auto r = applier::repair(actual, full.text, ro);
  if (!r.ok) {
    std::fprintf(stderr, "error[E0900]: %s: %s\n", o.prior_state.c_str(), r.error.c_str());
    return kExitError;
  }
  if (!write_output(o.output, r.program)) return kExitError;
  if (o.stats)
    std::fprintf(stderr,
                 "repair: chains kept: %zu, chains written: %zu, chains deleted: %zu, rules: %zu, jumps restored: %zu, "
                 "bytes: %zu\n",
                 r.stats.chains_kept, r.stats.chains_written, r.stats.chains_deleted, r.stats.rules_written,
                 r.stats.jumps_restored, r.program.size());
  return kExitOk;
}

int run(const CompileOptions& o) {
  SourceManager sm;
  DiagSink diags;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  Snapshot next, prior;
  bool ok = load_snapshot(o.inputs, lo, sm, &next, diags);
  if (!o.prior.empty()) ok = load_snapshot(o.prior, lo, sm, &prior, diags) && ok;
  std::optional<CompileResult> result;
  Backend backend = *backend_from_name(o.backend);
  if (ok) ok = check_configured_mode(next, o.backend_given, backend, diags);
  if (ok && o.prior.empty()) result = compile_iptables(next, backend, iptables::SyncOptions{}, diags);
  if (ok && !o.prior.empty()) {
    PriorOptions po;
    po.force_full = o.full;
    result = compile_iptables_from_prior(next, prior, backend, po, diags);
  }
  diags.sort_and_dedup();
  std::fputs(diags.render(sm).c_str(), stderr);
  if (!result) return kExitError;
  if (!o.prior_state.empty()) return repair_from_state(o, *result);
  if (!write_output(o.output, result->text)) return kExitError;
  if (o.stats) {
    if (!o.prior.empty())
      std::fprintf(stderr, "sync: %s%s%s, changed services: %zu\n", result->partial ? "partial" : "full",
                   result->full_sync_reason.empty() ? "" : " (", result->full_sync_reason.empty()
                                                                    ? ""
                                                                    : (result->full_sync_reason + ")").c_str(),
                   result->changed_services.size());
    print_stats(result->sync, result->text.size());
  }
  return kExitOk;
}

}  // namespace

void add_compile(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<CompileOptions>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a snapshot into the restore program kube-proxy would write");
  cmd->add_option("inputs", opts->inputs, "snapshot files or directories")->required();
  add_backend_option(cmd, opts->backend, "iptables (IPv4) or ip6tables (IPv6)");
  cmd->add_option("--prior", opts->prior,
                  "the snapshot kube-proxy last synced successfully: write the partial restore (KEP-3453) "
                  "that brings the node from it to SNAPSHOT");
  cmd->add_option("--prior-state", opts->prior_state,
                  "what the node really has (iptables-save output, or a restore program): write the smallest "
                  "program that brings it to SNAPSHOT's full state (stale chains deleted, matching chains left out)")
      ->excludes("--prior");
  // Flags that would be ignored are errors (a user who wrote them meant something).
  add_flavor_option(cmd, opts->flavor, "with --prior-state: iptables-restore semantics to check the repair against")
      ->needs("--prior-state");
  cmd->add_flag("--full", opts->full, "with --prior: force a full sync (still deletes the prior's stale chains)")
      ->needs("--prior");
  cmd->add_option("-o,--output", opts->output,
                  "write the program here: a file is replaced atomically (mode kept, symlinks followed); a device, "
                  "FIFO or /dev/fd/N is written to; stdout when absent or -");
  cmd->add_flag("--stats", opts->stats, "print what the program writes (to stderr)");
  add_max_input_size_option(cmd, opts->max_input_size);
  cmd->footer(
      "Examples:\n"
      "  kpc compile cluster/ -o v4.restore --stats        full sync, IPv4\n"
      "  kpc compile cluster/ --backend ip6tables          IPv6, to stdout\n"
      "  kpc compile new/ --prior old/                     the partial restore of the next sync (KEP-3453)\n"
      "  kpc compile cluster/ --prior-state node.save      the smallest repair of a node's drift\n"
      "Exit codes: 0 written, 2 error (located diagnostics on stderr; nothing written).");
  cmd->callback([cmd, opts, &exit_code] {
    opts->backend_given = cmd->count("--backend") > 0;
    exit_code = run(*opts);
  });
}

}  // namespace kpc::cli
