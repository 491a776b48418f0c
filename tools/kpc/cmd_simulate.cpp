// `kpc simulate [--state SAVE] [--noflush] PROGRAM... [--backend iptables|ip6tables] [--flavor legacy|nft]`:
// applies restore programs to a state (empty, or an iptables-save dump) as the
// real iptables-restore would, and prints the result as iptables-save prints it.
// Exit 0 applied, 1 a program fails as the real tool would (its message on
// stderr, the state after the tables committed so far on stdout), 2 bad input.
#include <cstdio>
#include <memory>
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
  uint64_t max_input_size = kDefaultMaxInputSize;
};

int run(const SimulateOptions& o) {
  IPFamily family = o.backend == "ip6tables" ? IPFamily::V6 : IPFamily::V4;
  verifier::Flavor flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  SourceManager sm;
  DiagSink diags;
  verifier::RulesetState state = verifier::RulesetState::empty(family);
  InputError err;
  if (!o.state_file.empty()) {
    InputText text;
    std::string load_err;
    if (!text.load(o.state_file, o.max_input_size, &err)) {
      std::fprintf(stderr, "%s\n", render(err).c_str());
      return kExitError;
    }
    if (!verifier::load_save(text.view(), family, flavor, state, &load_err, state.store)) {
      std::fprintf(stderr, "kpc simulate: %s: not a loadable iptables-save dump: %s\n", o.state_file.c_str(),
                   load_err.c_str());
      return kExitError;
    }
  }
  // Read every program first (each size-checked before it is read): unreadable or
  // oversized input is an error (2), not a failed restore (1).
  std::vector<std::unique_ptr<InputText>> files;
  for (const auto& path : o.programs) {
    files.push_back(std::make_unique<InputText>());
    if (!files.back()->load(path, o.max_input_size, &err)) {
      std::fprintf(stderr, "%s\n", render(err).c_str());
      return kExitError;
    }
  }
  verifier::ApplyOptions ao;
  ao.noflush = o.noflush;
  ao.flavor = flavor;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string_view text = files[i]->view();
    verifier::ParseError perr;
    perr.line = 0;
    verifier::ApplyResult r = verifier::apply_text(state, text, ao, &perr);
    if (perr.line && perr.kind == verifier::ParseErrorKind::Unsupported) {
      // Valid for iptables, but kpc cannot say what it does: not a verdict either way.
      uint32_t file = sm.add(o.programs[i], std::string(text));
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
  add_max_input_size_option(cmd, opts->max_input_size);
  cmd->footer(
      "Examples:\n"
      "  kpc simulate --noflush full.restore partial.restore      what the node holds after both\n"
      "  kpc simulate --state node.save --noflush repair.restore --flavor nft\n"
      "Exit codes: 0 applied, 1 a program fails (the state committed so far is printed), 2 bad input.");
  cmd->callback([opts, &exit_code] { exit_code = run(*opts); });
}

}  // namespace kpc::cli
