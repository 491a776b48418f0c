// `kpc simulate [--state SAVE] [--noflush] PROGRAM... [--backend iptables|ip6tables] [--flavor legacy|nft]`:
// applies restore programs to a state (empty, or an iptables-save dump) as the
// real iptables-restore would, and prints the result as iptables-save prints it.
// Exit 0 applied, 1 a program fails as the real tool would (its message on
// stderr, the state after the tables committed so far on stdout), 2 bad input.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/kpc/commands.h"
#include "verifier/state/state.h"

namespace kpc::cli {
namespace {

struct SimulateOptions {
  std::string state_file;
  std::vector<std::string> programs;
  bool noflush = false;
  std::string backend = "iptables";
  std::string flavor = "legacy";
};

bool read_all(const std::string& path, std::string* out) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    *out = ss.str();
    return true;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return !f.bad();
}

int run(const SimulateOptions& o) {
  IPFamily family = o.backend == "ip6tables" ? IPFamily::V6 : IPFamily::V4;
  verifier::Flavor flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  SourceManager sm;
  DiagSink diags;
  verifier::RulesetState state = verifier::RulesetState::empty(family);
  if (!o.state_file.empty()) {
    std::string text, err;
    if (!read_all(o.state_file, &text)) {
      std::fprintf(stderr, "kpc simulate: %s: cannot read\n", o.state_file.c_str());
      return kExitError;
    }
    if (!verifier::load_save(text, family, flavor, state, &err, state.store)) {
      std::fprintf(stderr, "kpc simulate: %s: not a loadable iptables-save dump: %s\n", o.state_file.c_str(), err.c_str());
      return kExitError;
    }
  }
  // Read every program first: unreadable input is an error (2), not a failed restore.
  std::vector<std::string> texts;
  for (const auto& path : o.programs) {
    texts.emplace_back();
    if (!read_all(path, &texts.back())) {
      std::fprintf(stderr, "kpc simulate: %s: cannot read\n", path.c_str());
      return kExitError;
    }
  }
  verifier::ApplyOptions ao;
  ao.noflush = o.noflush;
  ao.flavor = flavor;
  for (size_t i = 0; i < texts.size(); ++i) {
    verifier::ParseError perr;
    perr.line = 0;
    verifier::ApplyResult r = verifier::apply_text(state, texts[i], ao, &perr);
    if (perr.line && perr.kind == verifier::ParseErrorKind::Unsupported) {
      // Valid for iptables, but kpc cannot say what it does: not a verdict either way.
      uint32_t file = sm.add(o.programs[i], texts[i]);
      diags.report(DiagCode::RestoreSyntax, Pos{file, perr.line, perr.col ? perr.col : 1}, "", "",
                   "not modelled by kpc: " + perr.message);
      std::fputs(diags.render(sm).c_str(), stderr);
      return kExitError;
    }
    if (!r.ok()) {
      std::fputs(verifier::print_save(state, flavor).c_str(), stdout);
      std::fputs(r.error->message.c_str(), stderr);
      std::fprintf(stderr, "%s:%u: error[E0900]: %s (%s)\n", o.programs[i].c_str(), r.error->line,
                   r.error->reason.c_str(), verifier::error_class_name(r.error->cls));
      return kExitDifferent;
    }
  }
  std::fputs(verifier::print_save(state, flavor).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_simulate(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Apply restore programs as iptables-restore would and print the result as iptables-save would "
                  "(exit 0 applied, 1 a program fails, 2 bad input)");
  cmd->add_option("programs", opts->programs, "restore programs, applied in order ('-' for stdin)")->required();
  cmd->add_option("--state", opts->state_file, "starting state: an iptables-save dump (default: empty)");
  cmd->add_flag("--noflush", opts->noflush, "as iptables-restore --noflush (kube-proxy always uses it)");
  add_backend_option(cmd, opts->backend);
  add_flavor_option(cmd, opts->flavor, "legacy (iptables-legacy-restore) or nft (iptables-nft-restore)");
  cmd->callback([opts, &exit_code] { exit_code = run(*opts); });
}

}  // namespace kpc::cli
