// kpc: compile Kubernetes Service state into kube-proxy's dataplane programs and
// verify them. See README.md and docs/architecture.md.
#include <cstdio>
#include <exception>

#include "compiler/support/version.h"
#include "tools/kpc/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kpc: compiles Kubernetes Service state into the exact dataplane programs kube-proxy writes, "
               "and verifies them.\nExit codes: 0 ok/same, 1 differences found, 2 error."};
  app.set_version_flag("--version", std::string(kpc::kVersionLine));
  app.require_subcommand(1);
  int exit_code = kpc::cli::kExitOk;
  kpc::cli::add_validate(app, exit_code);
  kpc::cli::add_compile(app, exit_code);
  kpc::cli::add_verify(app, exit_code);
  kpc::cli::add_diff(app, exit_code);
  kpc::cli::add_drift(app, exit_code);
  kpc::cli::add_simulate(app, exit_code);
  kpc::cli::add_trace(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kpc::cli::kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kpc: internal error: %s\n", e.what());
    return kpc::cli::kExitInternal;
  }
  return exit_code;
}
