// Golden tests of the iptables back end over every fixture case:
//  - kpc's full program equals expected/<backend>.restore byte for byte;
//  - where the case reproduces a kube-proxy whole-dump expectation
//    (kubeproxy/<backend>.restore at a full sync), kpc's output after kube-proxy's
//    canonical sort equals it byte for byte;
//  - single-chain expectations (kubeproxy/<backend>.chains.yaml) hold exactly;
//  - the program is consistent (no chain declared twice, every jump declared);
//  - compiling the same objects in reverse document order gives identical bytes.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "tests/support/golden.h"
#include "tests/support/kp_sort.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

using Param = FixtureParam;

// Reverses the order of the YAML documents of every input (and of the inputs).
std::vector<std::pair<std::string, std::string>> reversed_documents(const std::vector<std::string>& inputs) {
  std::vector<std::pair<std::string, std::string>> files;
  for (auto it = inputs.rbegin(); it != inputs.rend(); ++it) {
    std::string text = read_file(*it);
    if (it->ends_with(".json")) {
      files.emplace_back(*it, text);
      continue;
    }
    std::vector<std::string> docs;
    size_t start = 0;
    for (;;) {
      size_t p = text.find("\n---", start);
      docs.push_back(text.substr(start, p == std::string::npos ? std::string::npos : p + 1 - start));
      if (p == std::string::npos) break;
      start = text.find('\n', p + 1);
      if (start == std::string::npos) break;
      ++start;
    }
    std::string out;
    for (auto d = docs.rbegin(); d != docs.rend(); ++d) out += *d + "\n---\n";
    files.emplace_back(*it, out);
  }
  return files;
}

class IptablesGolden : public testing::TestWithParam<Param> {};

TEST_P(IptablesGolden, MatchesExpectedAndKubeProxy) {
  const Param& p = GetParam();
  const FixtureStep& step = p.fixture.steps[p.step];
  Backend backend = *backend_from_name(p.backend);
  Compiled c = compile_paths(step.inputs, backend);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.diagnostics.find("internal error"), std::string::npos);

  expect_golden(step.dir + "/expected/" + p.backend + ".restore", c.text);

  if (p.step == 0) expect_kubeproxy_assertions(step.dir + "/kubeproxy/assertions.yaml", c);
  std::string kp = step.dir + "/kubeproxy/" + p.backend + ".restore";
  // Later full syncs of a sequence (e.g. after a failed restore) also delete the
  // prior state's stale chains; those are checked by the partial-restore tests.
  if (fs::exists(kp) && step.sync == "full" && p.step == 0)
    EXPECT_EQ(sort_iptables_rules(c.text), read_file(kp))
        << "differs from kube-proxy's expected dump (after sortIPTablesRules):\n"
        << line_diff(read_file(kp), sort_iptables_rules(c.text));

  std::string chains = step.dir + "/kubeproxy/" + p.backend + ".chains.yaml";
  if (fs::exists(chains)) {
    for (const auto& ch : YAML::LoadFile(chains)["chains"]) {
      std::vector<std::string> want;
      for (const auto& r : ch["rules"]) want.push_back(r.as<std::string>());
      EXPECT_EQ(chain_rules(c.text, ch["table"].as<std::string>(), ch["chain"].as<std::string>()), want)
          << ch["table"].as<std::string>() << "/" << ch["chain"].as<std::string>();
    }
  }

  for (const auto& problem : check_restore_consistency(c.text)) ADD_FAILURE() << problem;

  Compiled shuffled = compile_texts(reversed_documents(step.inputs), backend);
  ASSERT_TRUE(shuffled.ok) << shuffled.diagnostics;
  EXPECT_EQ(shuffled.text, c.text) << "output depends on input order";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IptablesGolden, testing::ValuesIn(fixture_params(0)),
                         [](const testing::TestParamInfo<Param>& i) { return fixture_param_name(i.param); });

}  // namespace
}  // namespace kpc::test
