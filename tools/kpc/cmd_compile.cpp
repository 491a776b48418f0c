// `kpc compile SNAPSHOT... [--backend iptables|ip6tables] [-o FILE]
//              [--prior OLD...] [--full] [--stats] [--node NAME | --node all -o DIR]`
#include <cstdio>
#include <filesystem>
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
  std::string node;  ///< --node: a Node's name, or "all" (one program per Node and family, in -o DIR)
};

constexpr const char* kAllNodes = "all";

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

// One full (or, with --prior, partial) sync for the snapshots as they are (their node chosen).
std::optional<CompileResult> compile_one(const CompileOptions& o, const Snapshot& next, const Snapshot& prior,
                                         Backend backend, DiagSink& diags) {
  if (o.prior.empty()) return compile_iptables(next, backend, iptables::SyncOptions{}, diags);
  PriorOptions po;
  po.force_full = o.full;
  return compile_iptables_from_prior(next, prior, backend, po, diags);
}

void print_sync_stats(const CompileOptions& o, const CompileResult& result) {
  if (!o.prior.empty())
    std::fprintf(stderr, "sync: %s%s%s, changed services: %zu\n", result.partial ? "partial" : "full",
                 result.full_sync_reason.empty() ? "" : " (",
                 result.full_sync_reason.empty() ? "" : (result.full_sync_reason + ")").c_str(),
                 result.changed_services.size());
  print_stats(result.sync, result.text.size());
}

// --node all -o DIR: DIR/<node>/iptables.restore and DIR/<node>/ip6tables.restore, for the
// families each Node has (with --backend: that family only). Every Node's context is checked
// before anything is written, so an error leaves DIR as it was.
int run_all_nodes(const CompileOptions& o, Snapshot& next, Snapshot& prior, SourceManager& sm, DiagSink& diags) {
  std::vector<Backend> backends;
  if (o.backend_given) {
    backends.push_back(*backend_from_name(o.backend));
  } else {
    for (IPFamily f : {IPFamily::V4, IPFamily::V6})
      if (auto b = backend_for_mode(next, f, diags)) backends.push_back(*b);
  }
  if (next.nodes.empty())
    diags.report(DiagCode::NodeUnknown, {}, "", "", "--node all: the snapshot has no Node objects");
  std::vector<std::pair<std::string, Backend>> jobs;
  std::vector<std::string> skipped;
  for (const auto& node : next.nodes) {
    const std::string& name = node.meta.name;
    if (!select_node(&next, name, sm, diags) || (!o.prior.empty() && !select_node(&prior, name, sm, diags))) continue;
    size_t before = jobs.size();
    DiagSink unavailable;  // a family the Node has no address of is not compiled (kube-proxy runs no such proxier)
    for (Backend b : backends) {
      DiagSink ctx_diags;
      if (node_context_for(next, b, ctx_diags)) {
        jobs.emplace_back(name, b);
        for (const auto& d : ctx_diags.all()) diags.report(d);
      } else {
        for (const auto& d : ctx_diags.all()) (d.code == DiagCode::FamilyUnavailable ? unavailable : diags).report(d);
      }
    }
    if (jobs.size() != before) continue;
    if (!o.backend_given) {  // no family at all: an error, not a silently missing node
      for (const auto& d : unavailable.all()) diags.report(d);
    } else if (!unavailable.all().empty()) {  // said, though it is no error: this node gets no program
      skipped.push_back(name);
    }
  }
  for (const auto& name : skipped)
    std::fprintf(stderr, "note: Node %s has no %s address: no %s program (kube-proxy runs no such proxier there)\n",
                 name.c_str(), family_name(backend_family(backends[0])), o.backend.c_str());
  diags.sort_and_dedup();
  std::fputs(diags.render(sm).c_str(), stderr);
  if (diags.has_errors()) return kExitError;
  std::error_code ec;
  std::filesystem::create_directories(o.output, ec);
  if (ec) {
    std::fprintf(stderr, "error[E0005]: %s: %s\n", o.output.c_str(), ec.message().c_str());
    return kExitError;
  }
  for (const auto& [name, backend] : jobs) {
    select_node(&next, name, sm, diags);
    if (!o.prior.empty()) select_node(&prior, name, sm, diags);
    DiagSink quiet;  // reported above already
    auto result = compile_one(o, next, prior, backend, quiet);
    if (!result) {
      std::fputs(quiet.render(sm).c_str(), stderr);
      return kExitError;
    }
    std::string dir = o.output + "/" + name;
    std::filesystem::create_directories(dir, ec);
    std::string path = dir + (backend == Backend::IPTables ? "/iptables.restore" : "/ip6tables.restore");
    if (ec) {
      std::fprintf(stderr, "error[E0005]: %s: %s\n", dir.c_str(), ec.message().c_str());
      return kExitError;
    }
    if (!write_output(path, result->text)) return kExitError;
    if (o.stats) {
      std::fprintf(stderr, "%s:\n", path.c_str());
      print_sync_stats(o, *result);
    }
  }
  return kExitOk;
}

int run(const CompileOptions& o) {
  SourceManager sm;
  DiagSink diags;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  bool all_nodes = o.node == kAllNodes;
  if (!all_nodes) lo.node_name = o.node;
  Snapshot next, prior;
  bool ok = load_snapshot(o.inputs, lo, sm, &next, diags);
  if (!o.prior.empty()) ok = load_snapshot(o.prior, lo, sm, &prior, diags) && ok;
  if (ok && all_nodes) return run_all_nodes(o, next, prior, sm, diags);
  std::optional<CompileResult> result;
  Backend backend = *backend_from_name(o.backend);
  if (ok) ok = check_configured_mode(next, o.backend_given, backend, diags);
  if (ok) result = compile_one(o, next, prior, backend, diags);
  diags.sort_and_dedup();
  std::fputs(diags.render(sm).c_str(), stderr);
  if (!result) return kExitError;
  if (!o.prior_state.empty()) return repair_from_state(o, *result);
  if (!write_output(o.output, result->text)) return kExitError;
  if (o.stats) print_sync_stats(o, *result);
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
  add_node_option(cmd, opts->node,
                  "; `--node all`: one program per Node and family, DIR/<node>/iptables.restore and "
                  "DIR/<node>/ip6tables.restore (only the families the Node has an address of; with --backend, that "
                  "family only), with -o DIR");
  cmd->footer(
      "Examples:\n"
      "  kpc compile cluster/ -o v4.restore --stats        full sync, IPv4\n"
      "  kpc compile cluster/ --backend ip6tables          IPv6, to stdout\n"
      "  kpc compile new/ --prior old/                     the partial restore of the next sync (KEP-3453)\n"
      "  kpc compile cluster/ --prior-state node.save      the smallest repair of a node's drift\n"
      "Exit codes: 0 written, 2 error (located diagnostics on stderr; nothing written).");
  cmd->callback([cmd, opts, &exit_code] {
    opts->backend_given = cmd->count("--backend") > 0;
    if (opts->node == kAllNodes && (opts->output.empty() || opts->output == "-"))
      throw CLI::ValidationError("--node", "--node all writes one file per Node and family: give -o DIR");
    if (opts->node == kAllNodes && !opts->prior_state.empty())
      throw CLI::ValidationError("--node", "--node all cannot be combined with --prior-state (one node's state)");
    exit_code = run(*opts);
  });
}

}  // namespace kpc::cli
