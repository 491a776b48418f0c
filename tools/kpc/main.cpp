// kpc: compile Kubernetes Service state into kube-proxy's dataplane programs and
// verify them. See README.md and docs/architecture.md.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "compiler/support/allocator.h"
#include "compiler/support/version.h"
#include "tools/cli_docs/cli_docs.h"
#include "compiler/driver/capabilities.h"
#include "tools/kpc/commands.h"

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The closest name within a third of its length (at least 2 edits), or "".
std::string nearest(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& n : names)
    if (size_t d = edit_distance(word, n); d < best_d) best_d = d, best = n;
  return best;
}

// "did you mean" for an unknown subcommand or a misspelled long option of the one given.
void suggest(CLI::App& app, int argc, char** argv) {
  if (argc < 2) return;
  std::vector<std::string> commands;
  for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) commands.push_back(sub->get_name());
  std::string first = argv[1];
  if (first[0] != '-' && std::find(commands.begin(), commands.end(), first) == commands.end()) {
    std::string n = nearest(first, commands);
    std::fprintf(stderr, "kpc: unknown command '%s'%s\n", first.c_str(),
                 n.empty() ? "" : ("; did you mean '" + n + "'?").c_str());
    return;
  }
  CLI::App* sub = first[0] == '-' ? nullptr : app.get_subcommand(first);
  if (!sub) return;
  std::vector<std::string> options;
  for (const auto* opt : sub->get_options())
    for (const auto& l : opt->get_lnames()) options.push_back("--" + l);
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    a = a.substr(0, a.find('='));
    if (std::find(options.begin(), options.end(), a) != options.end()) continue;
    if (std::string n = nearest(a, options); !n.empty())
      std::fprintf(stderr, "kpc %s: unknown option '%s'; did you mean '%s'?\n", first.c_str(), a.c_str(), n.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  kpc::tune_allocator_for_batch();
  CLI::App app{"kpc: compiles Kubernetes Service state into the exact dataplane programs kube-proxy writes, "
               "and verifies them.\nExit codes: 0 ok/same, 1 differences found, 2 error.",
               "kpc"};
#ifndef KPC_GIT_REVISION
#define KPC_GIT_REVISION "unknown"
#endif
#ifndef KPC_BUILD_TYPE
#define KPC_BUILD_TYPE "unspecified"
#endif
  app.set_version_flag("--version", std::string(kpc::kVersionLine) + "\nsource revision " KPC_GIT_REVISION
                                        ", build type " KPC_BUILD_TYPE "\n" + kpc::allocator_line());
  app.require_subcommand(1);
  app.footer("Run 'kpc COMMAND --help' for a command's options, examples and exit codes.");
  int exit_code = kpc::cli::kExitOk;
  kpc::cli::add_validate(app, exit_code);
  kpc::cli::add_compile(app, exit_code);
  kpc::cli::add_verify(app, exit_code);
  kpc::cli::add_diff(app, exit_code);
  kpc::cli::add_drift(app, exit_code);
  kpc::cli::add_golden(app, exit_code);
  kpc::cli::add_simulate(app, exit_code);
  kpc::cli::add_trace(app, exit_code);
  kpc::cli::add_ipvs(app, exit_code);
  // `kpc __capabilities [--format json]`: the capability matrix (compiler/driver/capabilities.h),
  // as docs/capabilities.md's tables or as JSON for the test that runs every cell.
  if (argc >= 2 && std::string(argv[1]) == "__capabilities") {
    if (argc == 4 && std::string(argv[2]) == "--format" && std::string(argv[3]) == "json") {
      nlohmann::ordered_json cells = nlohmann::ordered_json::array();
      for (const auto& c : kpc::capabilities()) {
        const char* support = c.support == kpc::Support::Works     ? "works"
                              : c.support == kpc::Support::Sampled ? "sampled"
                                                                   : "refused";
        cells.push_back({{"command", c.command}, {"mode", c.mode}, {"input", c.input}, {"support", support},
                         {"note", c.note}, {"example", c.example}, {"exit_code", c.exit_code}, {"expect", c.expect}});
      }
      std::fputs((cells.dump(1) + "\n").c_str(), stdout);
    } else {
      std::fputs(kpc::capabilities_markdown().c_str(), stdout);
    }
    return kpc::cli::kExitOk;
  }
  // `kpc __complete bash|zsh`, `kpc __man`: generated from the definitions above (the build runs them).
  if (int rc = 0; kpc::cli_docs::handle(app, "kpc", std::string("kpc ") + kpc::kVersion, argc, argv, &rc)) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    suggest(app, argc, argv);
    app.exit(e);
    return kpc::cli::kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kpc: internal error: %s\n", e.what());
    return kpc::cli::kExitInternal;
  }
  // --format json and an error before the command printed its document: the diagnostics as one.
  // The command may be nested (`kpc ipvs drain-plan`): the innermost one parsed, named in full.
  if (exit_code == kpc::cli::kExitError && !kpc::cli::json_printed()) {
    std::string name;
    for (CLI::App* cmd = &app; cmd;) {
      auto subs = cmd->get_subcommands();
      if (subs.empty()) break;
      cmd = subs.front();
      name += (name.empty() ? "" : " ") + cmd->get_name();
      if (const CLI::Option* f = cmd->get_option_no_throw("--format"); f && f->count() && f->results().back() == "json") {
        kpc::cli::print_error_document(name, exit_code);
        break;
      }
    }
  }
  return exit_code;
}
