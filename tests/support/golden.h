// Golden fixtures: discovery of fixtures/<case>/ (case.yaml + snapshot files +
// expected/<backend>.restore), compiling a snapshot through the library, and
// comparing with (or, with KPC_UPDATE_GOLDEN=1, rewriting) expected files.
// A missing expected file is a failure unless updating. See docs/testing.md.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "compiler/driver/compile.h"

namespace kpc::test {

struct FixtureStep {
  std::string dir;                     ///< absolute
  std::vector<std::string> inputs;     ///< snapshot files of this step
  std::string sync = "full";           ///< kube-proxy's sync kind at this step (full/partial)
  bool forced_full = false;            ///< kube-proxy was forced to sync fully (retry, forceSyncProxyRules)
  bool expect_restore_failure = false; ///< the test injects kernel state that makes this restore fail
  /// Rules the test appends to the kernel before this step's sync (injectBefore): table, rule.
  std::vector<std::pair<std::string, std::string>> inject_before;
  std::string since_last_cleanup;      ///< Go duration, when the test pins the last stale-chain cleanup
};

struct FixtureCase {
  std::string name;                    ///< directory name
  std::string dir;                     ///< absolute
  std::vector<std::string> backends;   ///< iptables / ip6tables
  std::vector<FixtureStep> steps;      ///< one for single-snapshot cases
};

/// One (case, step, backend) of a fixture-driven parameterised test.
struct FixtureParam {
  FixtureCase fixture;
  size_t step;
  std::string backend;
};
/// The back ends the iptables golden suites compile (iptables, ip6tables). Fixtures of
/// other back ends (backends: [nftables], the kp-nft-* cases) are discovered too but
/// checked by their own suites.
bool is_iptables_backend(const std::string& backend);
/// Every (case, step >= first_step, iptables/ip6tables backend) in fixture order.
std::vector<FixtureParam> fixture_params(size_t first_step);
/// A gtest-safe name: "<case>_<step>_<backend>" with non-alphanumerics as '_'.
std::string fixture_param_name(const FixtureParam& p);
void PrintTo(const FixtureParam& p, std::ostream* os);

/// Every fixtures/<case>/ with a case.yaml, sorted by name.
std::vector<FixtureCase> discover_fixtures();
bool updating_golden();

struct Compiled {
  bool ok = false;
  std::string text;
  std::string diagnostics;
  iptables::SyncResult sync;
  bool partial = false;
};
Compiled compile_paths(const std::vector<std::string>& inputs, Backend backend, const iptables::SyncOptions& opts = {});
Compiled compile_texts(const std::vector<std::pair<std::string, std::string>>& files, Backend backend,
                       const iptables::SyncOptions& opts = {});

/// A sync from the prior step's snapshot (partial unless forced full).
Compiled compile_from_prior_paths(const std::vector<std::string>& next, const std::vector<std::string>& prior,
                                  Backend backend, const PriorOptions& opts);

/// Checks kube-proxy's line/count/metric expectations (kubeproxy/assertions.yaml) against
/// a compiled program: sep-dnat-lines, contains, not-contains, rule-with-destination and
/// the rule-count / no-local-endpoints metrics. Other kinds (kernel-side) are ignored.
void expect_kubeproxy_assertions(const std::string& path, const Compiled& c);

/// Compares actual with the file at path (gtest failure with a line diff), or rewrites it when updating.
void expect_golden(const std::string& path, const std::string& actual);
/// A short unified-style diff of two texts (first differing lines with context).
std::string line_diff(const std::string& expected, const std::string& actual);

}  // namespace kpc::test
