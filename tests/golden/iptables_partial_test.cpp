// Partial restores (KEP-3453) over every multi-step fixture: step N is compiled
// from step N-1's snapshot (the state kube-proxy last synced successfully), as
// kube-proxy's repeated-sync tests do. Checks:
//  - kpc's program equals steps/NN/expected/<backend>.partial.restore byte for byte;
//  - where kube-proxy's own expectation exists (kubeproxy/<backend>.restore), kpc's
//    output after kube-proxy's canonical sort equals it byte for byte;
//  - the partial/full decision matches the step's (sync: partial|full).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "compiler/model/decode.h"
#include "verifier/state/state.h"
#include "tests/support/golden.h"
#include "tests/support/kp_sort.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

using Param = FixtureParam;

class IptablesPartial : public testing::TestWithParam<Param> {};

// The nat chains in the kernel after applying a restore program to a kernel that had
// `chains` (declared chains are created, -X chains removed).
std::set<std::string> apply_chains(std::set<std::string> chains, const std::string& program) {
  bool nat = false;
  std::istringstream in(program);
  for (std::string line; std::getline(in, line);) {
    if (line[0] == '*') nat = line == "*nat";
    else if (nat && line[0] == ':') chains.insert(line.substr(1, line.find(' ') - 1));
    else if (nat && line.rfind("-X ", 0) == 0) chains.erase(line.substr(3));
  }
  return chains;
}

PriorOptions options_for(const FixtureStep& step) {
  PriorOptions opts;
  opts.force_full = step.forced_full;
  if (!step.since_last_cleanup.empty()) opts.since_last_cleanup = parse_go_duration(step.since_last_cleanup);
  return opts;
}

// A step whose restore kube-proxy's test makes fail by injecting rules into the kernel first
// (TestSyncProxyRulesRepeated step 9: a rule in svc3's chain jumps to the endpoint chain the
// partial deletes). Replayed on kpc's model of iptables-restore: the kernel after the previous
// steps, plus the injected rules, refuses kpc's partial and is left unchanged — the failure
// kube-proxy counts (sync_proxy_rules_iptables_partial_restore_failures_total) and answers with
// a full sync (the next step, forcedFullSync). The kernel test
// ApplierFaults.ForeignRuleMakesThePartialFailThenAFullSyncConvergesAsKubeProxys does it on
// the real kernel with kpc-applier's loop.
std::vector<std::string> nat_chains(const verifier::RulesetState& kernel) {
  std::vector<std::string> out;
  for (const auto& c : kernel.table(ir::TableId::Nat).chains)
    if (!c.builtin) out.emplace_back(c.name);
  return out;
}

void expect_restore_failure(const Param& p, Backend backend) {
  const auto& steps = p.fixture.steps;
  const FixtureStep& step = steps[p.step];
  ASSERT_FALSE(step.inject_before.empty()) << "a failing restore needs the kernel state the test injects";
  verifier::RulesetState kernel =
      verifier::RulesetState::empty(backend == Backend::IP6Tables ? IPFamily::V6 : IPFamily::V4);
  verifier::ApplyOptions ao;
  ao.noflush = true;
  Compiled c0 = compile_paths(steps[0].inputs, backend);
  ASSERT_TRUE(c0.ok && verifier::apply_text(kernel, c0.text, ao).ok());
  size_t prior = 0;
  for (size_t k = 1; k < p.step; ++k) {
    if (steps[k].expect_restore_failure) continue;
    PriorOptions o = options_for(steps[k]);
    o.existing_nat_chains = nat_chains(kernel);
    Compiled ck = compile_from_prior_paths(steps[k].inputs, steps[prior].inputs, backend, o);
    ASSERT_TRUE(ck.ok) << ck.diagnostics;
    ASSERT_TRUE(verifier::apply_text(kernel, ck.text, ao).ok()) << "step " << k + 1;
    prior = k;
  }
  std::string injected;
  for (const auto& [table, rule] : step.inject_before) injected += "*" + table + "\n" + rule + "\nCOMMIT\n";
  ASSERT_TRUE(verifier::apply_text(kernel, injected, ao).ok()) << injected;
  PriorOptions opts = options_for(step);
  opts.existing_nat_chains = nat_chains(kernel);
  Compiled c = compile_from_prior_paths(step.inputs, steps[prior].inputs, backend, opts);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_TRUE(c.partial) << "kube-proxy's failing sync at this step is a partial one";
  const std::string before = verifier::print_save(kernel, verifier::Flavor::Legacy);
  auto r = verifier::apply_text(kernel, c.text, ao);
  EXPECT_FALSE(r.ok()) << "the injected rules should make this restore fail:\n" << c.text;
  EXPECT_EQ(verifier::print_save(kernel, verifier::Flavor::Legacy), before) << "a failed restore changes nothing";
  // The next step is kube-proxy's retry: a forced full sync.
  if (p.step + 1 < steps.size()) EXPECT_TRUE(steps[p.step + 1].forced_full);
}

TEST_P(IptablesPartial, MatchesExpectedAndKubeProxy) {
  const Param& p = GetParam();
  const auto& steps = p.fixture.steps;
  const FixtureStep& step = steps[p.step];
  Backend backend = *backend_from_name(p.backend);
  if (step.expect_restore_failure) return expect_restore_failure(p, backend);
  // Replay the sequence up to here: the kernel's nat chains are what every successful
  // restore so far created and did not delete (throttled cleanups leave chains behind).
  std::set<std::string> kernel = apply_chains({}, compile_paths(steps[0].inputs, backend).text);
  size_t prior = 0;
  for (size_t k = 1; k < p.step; ++k) {
    if (steps[k].expect_restore_failure) continue;  // the restore failed: the kernel kept its state
    PriorOptions o = options_for(steps[k]);
    o.existing_nat_chains = std::vector<std::string>(kernel.begin(), kernel.end());
    Compiled ck = compile_from_prior_paths(steps[k].inputs, steps[prior].inputs, backend, o);
    ASSERT_TRUE(ck.ok) << ck.diagnostics;
    kernel = apply_chains(kernel, ck.text);
    prior = k;
  }
  PriorOptions opts = options_for(step);
  opts.existing_nat_chains = std::vector<std::string>(kernel.begin(), kernel.end());
  Compiled c = compile_from_prior_paths(step.inputs, steps[prior].inputs, backend, opts);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.partial, step.sync == "partial") << "kube-proxy's sync at this step is " << step.sync;

  expect_golden(step.dir + "/expected/" + p.backend + ".partial.restore", c.text);

  expect_kubeproxy_assertions(step.dir + "/kubeproxy/assertions.yaml", c);
  std::string kp = step.dir + "/kubeproxy/" + p.backend + ".restore";
  if (fs::exists(kp))
    EXPECT_EQ(sort_iptables_rules(c.text), read_file(kp))
        << "differs from kube-proxy's expected dump (after sortIPTablesRules):\n"
        << line_diff(read_file(kp), sort_iptables_rules(c.text));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IptablesPartial, testing::ValuesIn(fixture_params(1)),
                         [](const testing::TestParamInfo<Param>& i) { return fixture_param_name(i.param); });

}  // namespace
}  // namespace kpc::test
