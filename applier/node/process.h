// Running the node's tools (iptables-restore, nft, ...): argv (no shell), stdin text, both
// outputs captured. The applier's only way of touching the kernel.
#pragma once

#include <string>
#include <vector>

namespace kpc::applier {

struct ProcessResult {
  int exit_code = -1;  ///< -1: could not start, or killed by a signal
  std::string out, err;
};

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& stdin_text = "");

struct ProcessOptions {
  /// "NAME=value" entries added to (or replacing those of) the applier's environment.
  std::vector<std::string> extra_env;
  /// Killed (SIGKILL) after this long; 0 = no limit. ProcessResult::timed_out says so.
  int timeout_ms = 0;
};
struct TimedProcessResult : ProcessResult {
  bool timed_out = false;
};
TimedProcessResult run_process(const std::vector<std::string>& argv, const std::string& stdin_text,
                               const ProcessOptions& options);

/// Whether a program is found on PATH (or is an executable path).
bool program_exists(const std::string& name);

}  // namespace kpc::applier
