// Issue 4's ground truth, as a property: for a random cluster and a random sequence
// of changes, loading full(OLD) and then partial(OLD -> NEW) with --noflush into a
// network namespace gives exactly the iptables-save of a namespace loaded with
// full(NEW) alone. IPv4 and IPv6, legacy and nft flavours. Every full program of
// the sequence is also a random-cluster load test for issue 3.
//
// Size: 50 cases in CI (the release preset's KPC_RC_PARAMS_kernel: ~175 steps, each checked for
// IPv4 and IPv6 in both flavours), 300 in the release-long preset; RC_PARAMS="max_success=3000"
// runs thousands of steps.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "compiler/driver/compile.h"
#include "compiler/model/loader.h"
#include "tests/support/cluster_env.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/netns.h"
#include "tests/support/snapshot_gen.h"

namespace kpc::test {
namespace {

using testgen::GeneratedCluster;

std::optional<Snapshot> load(const GeneratedCluster& c) { return load_compilable(c); }

// ------------------------------------------------------------------ the kernel side
// iptables-save output made comparable: no comments/counters, chain declarations
// sorted, rules grouped by chain (rule order within a chain kept).
std::string normalized_save(const std::string& save) {
  std::map<std::string, std::vector<std::string>> tables;
  std::string table;
  std::istringstream in(save);
  std::map<std::string, std::map<std::string, std::vector<std::string>>> rules;
  std::map<std::string, std::vector<std::string>> decls;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line == "COMMIT") continue;
    if (line[0] == '*') table = line.substr(1);
    else if (line[0] == ':') decls[table].push_back(line.substr(0, line.find(" [")));
    else if (line.rfind("-A ", 0) == 0) rules[table][line.substr(3, line.find(' ', 3) - 3)].push_back(line);
  }
  std::string out;
  for (auto& [t, d] : decls) {
    std::sort(d.begin(), d.end());
    out += "*" + t + "\n";
    for (const auto& l : d) out += l + "\n";
    for (const auto& [chain, rs] : rules[t])
      for (const auto& r : rs) out += r + "\n";
  }
  return out;
}

struct Kernel {
  std::string flavor;
  bool ipv6;
  Netns a, b;  // a: full(OLD) then partial; b: full(NEW) alone
  IptablesTools tools;
  Kernel(std::string f, bool v6) : flavor(std::move(f)), ipv6(v6), tools(iptables_tools(flavor, v6)) {
    a.add_kube_proxy_nfacct();
    b.add_kube_proxy_nfacct();
  }
  // Without --noflush, an empty table block flushes the table and deletes its chains.
  void reset(const Netns& ns) const { ns.exec({tools.restore}, "*filter\nCOMMIT\n*nat\nCOMMIT\n"); }
};

Kernel& kernel(const std::string& flavor, bool ipv6) {
  static std::map<std::pair<std::string, bool>, std::unique_ptr<Kernel>> kernels;
  auto& k = kernels[{flavor, ipv6}];
  if (!k) k = std::make_unique<Kernel>(flavor, ipv6);
  return *k;
}

// Counts the (prior, next, family, flavour) checks that ran, reported at exit (docs/testing.md).
struct StepCounter {
  int steps = 0;
  ~StepCounter() {
    if (steps) std::fprintf(stderr, "KernelPartial: %d kernel checks (prior+partial vs full)\n", steps);
  }
};
StepCounter step_counter;

void check_step(const Snapshot& prior, const Snapshot& next, Backend backend) {
  DiagSink diags;
  auto full_old = compile_iptables(prior, backend, {}, diags);
  auto full_new = compile_iptables(next, backend, {}, diags);
  auto partial = compile_iptables_from_prior(next, prior, backend, {}, diags);
  RC_ASSERT(full_old && full_new && partial);
  for (const char* flavor : {"legacy", "nft"}) {
    Kernel& k = kernel(flavor, backend == Backend::IP6Tables);
    k.reset(k.a);
    k.reset(k.b);
    auto r1 = k.a.exec({k.tools.restore, "--noflush"}, full_old->text);
    RC_ASSERT(r1.exit_code == 0);  // issue 3: every random full program loads
    auto r2 = k.a.exec({k.tools.restore, "--noflush"}, partial->text);
    if (r2.exit_code != 0) RC_FAIL(std::string(flavor) + ": partial restore rejected: " + r2.err + "\n" + partial->text);
    auto r3 = k.b.exec({k.tools.restore, "--noflush"}, full_new->text);
    RC_ASSERT(r3.exit_code == 0);
    std::string got = normalized_save(k.a.exec({k.tools.save}).out);
    std::string want = normalized_save(k.b.exec({k.tools.save}).out);
    ++step_counter.steps;
    if (got != want)
      RC_FAIL(std::string(flavor) + ": prior + partial differs from full:\n--- partial program\n" + partial->text +
              "\n--- got\n" + got + "\n--- want\n" + want);
  }
}

}  // namespace

RC_GTEST_PROP(KernelPartial, PriorPlusPartialEqualsFull, ()) {
  if (!can_use_netns()) {
    RC_SUCCEED("needs root and network namespaces");
  }
  testgen::GenOptions go;
  go.max_services = 6;
  GeneratedCluster c = make_compilable(*testgen::gen_cluster(go));
  auto prior = load(c);
  RC_PRE(prior.has_value());
  const int steps = *rc::gen::inRange(1, 7);  // 50 cases x ~3.5 steps: > 150 steps per CI run
  for (int i = 0; i < steps; ++i) {
    GeneratedCluster next_c = c;
    mutate_cluster(next_c, i + 1);
    auto next = load(next_c);
    if (!next) continue;  // a change the API would refuse (rare): skip it
    for (Backend b : {Backend::IPTables, Backend::IP6Tables}) check_step(*prior, *next, b);
    c = std::move(next_c);
    prior = std::move(next);
  }
}

}  // namespace kpc::test
