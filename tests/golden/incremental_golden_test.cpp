// The incremental compiler (compiler/driver/incremental.h) over every fixture, as an
// on-node applier would drive it: one compiler per case and back end, each step's
// snapshot delivered as object events (replace_all), one sync per step. Its first sync
// must equal the step's expected/<backend>.restore and every later one the step's
// expected/<backend>.partial.restore, byte for byte, with kube-proxy's partial/full
// decision. A step whose restore fails in kube-proxy's test (the kernel rolls it back) is
// synced and then reported with restore_failed(), as the applier would.
#include <gtest/gtest.h>

#include "compiler/driver/incremental.h"
#include "compiler/model/decode.h"
#include "compiler/model/loader.h"
#include "tests/support/golden.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

struct CaseBackend {
  FixtureCase fixture;
  std::string backend;
};

std::vector<CaseBackend> all_cases() {
  std::vector<CaseBackend> out;
  for (const auto& c : discover_fixtures())
    for (const auto& b : c.backends)
      if (is_iptables_backend(b)) out.push_back({c, b});
  return out;
}

class IncrementalGolden : public testing::TestWithParam<CaseBackend> {};

TEST_P(IncrementalGolden, EveryStepMatchesTheExpectedProgram) {
  const auto& [fixture, backend_name] = GetParam();
  Backend backend = *backend_from_name(backend_name);
  IncrementalCompiler ic(backend);
  for (size_t i = 0; i < fixture.steps.size(); ++i) {
    const FixtureStep& step = fixture.steps[i];
    SCOPED_TRACE("step " + std::to_string(i + 1));
    SourceManager sm;
    DiagSink diags;
    Snapshot snap;
    ASSERT_TRUE(load_snapshot(step.inputs, LoadOptions{}, sm, &snap, diags)) << diags.render(sm);
    ic.replace_all(snap);
    IncrementalSyncOptions opts;
    opts.force_full = step.forced_full;
    if (!step.since_last_cleanup.empty()) opts.since_last_cleanup = parse_go_duration(step.since_last_cleanup);
    auto r = ic.sync(opts, diags);
    ASSERT_TRUE(r.has_value()) << diags.render(sm);
    if (step.expect_restore_failure) {
      ic.restore_failed();
      continue;
    }
    // (Compared, never rewritten: the batch golden tests own the expected files.)
    std::string expected =
        read_file(step.dir + "/expected/" + backend_name + (i == 0 ? ".restore" : ".partial.restore"));
    EXPECT_EQ(r->partial, i > 0 && step.sync == "partial") << "kube-proxy's sync at this step is " << step.sync;
    EXPECT_EQ(r->text, expected) << line_diff(expected, r->text);
  }
}

std::string case_name(const testing::TestParamInfo<CaseBackend>& info) {
  std::string n = info.param.fixture.name + "_" + info.param.backend;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IncrementalGolden, testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace kpc::test
