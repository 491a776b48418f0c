// `kpc compile SNAPSHOT... [--backend iptables|ip6tables] [-o FILE]`
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/driver/compile.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"

namespace kpc::cli {
namespace {

struct CompileOptions {
  std::vector<std::string> inputs;
  std::string backend = "iptables";
  std::string output;
  bool stats = false;
  size_t max_input_size = 64u << 20;
};

int run(const CompileOptions& o) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  bool ok = load_snapshot(o.inputs, lo, sm, &snap, diags);
  std::optional<CompileResult> result;
  auto backend = backend_from_name(o.backend);
  if (ok && backend) result = compile_iptables(snap, *backend, iptables::SyncOptions{}, diags);
  diags.sort_and_dedup();
  std::fputs(diags.render(sm).c_str(), stderr);
  if (!result) return kExitError;
  if (!write_output(o.output, result->text)) return kExitError;
  if (o.stats) print_stats(result->sync, result->text.size());
  return kExitOk;
}

}  // namespace

void add_compile(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<CompileOptions>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a snapshot into the restore program kube-proxy would write");
  cmd->add_option("inputs", opts->inputs, "snapshot files or directories")->required();
  cmd->add_option("--backend", opts->backend, "iptables (IPv4) or ip6tables (IPv6)")
      ->check(CLI::IsMember({"iptables", "ip6tables"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", opts->output, "write the program here (atomically; stdout when absent)");
  cmd->add_flag("--stats", opts->stats, "print what the program writes (to stderr)");
  cmd->add_option("--max-input-size", opts->max_input_size, "largest accepted input file, in bytes")
      ->capture_default_str();
  cmd->callback([opts, &exit_code] { exit_code = run(*opts); });
}

}  // namespace kpc::cli
