// Properties of the iptables compiler over random valid clusters (tests/support/snapshot_gen):
//  - determinism: any order of the input documents gives the same bytes;
//  - consistency: no chain declared twice, every jump to a declared chain;
//  - the IR kept on request prints to exactly the text the compiler wrote (one printer);
//  - a sync from an unchanged prior is partial and rewrites no per-service chain.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "compiler/driver/compile.h"
#include "compiler/ir/printer.h"
#include "compiler/model/loader.h"
#include "tests/support/cluster_env.h"
#include "tests/support/kp_sort.h"
#include "tests/support/snapshot_gen.h"

namespace kpc::test {
namespace {

std::optional<Snapshot> load_docs(const std::vector<std::string>& docs) {
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i < docs.size(); ++i) files.emplace_back("doc" + std::to_string(i) + ".yaml", docs[i]);
  return load_with_environment(files);
}

std::string compile_text(const Snapshot& s, Backend b, bool keep_ir = false, std::string* printed_ir = nullptr) {
  DiagSink diags;
  iptables::SyncOptions o;
  o.keep_ir = keep_ir;
  auto r = compile_iptables(s, b, o, diags);
  RC_ASSERT(r.has_value());
  if (printed_ir) *printed_ir = ir::print_program(r->sync.program);
  return r->text;
}

}  // namespace

RC_GTEST_PROP(CompileProps, DeterministicUnderDocumentShuffling, ()) {
  auto c = make_compilable(*testgen::gen_cluster());
  auto docs = c.yaml_documents();
  auto a = load_docs(docs);
  RC_ASSERT(a.has_value());
  auto shuffled = *rc::gen::container<std::vector<size_t>>(docs.size(), rc::gen::arbitrary<size_t>());
  std::vector<std::pair<size_t, std::string>> keyed;
  for (size_t i = 0; i < docs.size(); ++i) keyed.emplace_back(shuffled[i], docs[i]);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> reordered;
  for (auto& [k, d] : keyed) reordered.push_back(d);
  auto b = load_docs(reordered);
  RC_ASSERT(b.has_value());
  for (Backend be : {Backend::IPTables, Backend::IP6Tables}) RC_ASSERT(compile_text(*a, be) == compile_text(*b, be));
}

RC_GTEST_PROP(CompileProps, ProgramsAreConsistentAndPrintedFromTheIR, ()) {
  auto c = make_compilable(*testgen::gen_cluster());
  auto s = load_docs(c.yaml_documents());
  RC_ASSERT(s.has_value());
  for (Backend be : {Backend::IPTables, Backend::IP6Tables}) {
    std::string from_ir;
    std::string text = compile_text(*s, be, true, &from_ir);
    RC_ASSERT(text == from_ir);
    auto problems = check_restore_consistency(text);
    if (!problems.empty()) RC_FAIL(problems[0] + "\n" + text);
  }
}

RC_GTEST_PROP(CompileProps, UnchangedPriorGivesPartialWithoutServiceChains, ()) {
  auto c = make_compilable(*testgen::gen_cluster());
  auto s = load_docs(c.yaml_documents());
  RC_ASSERT(s.has_value());
  for (Backend be : {Backend::IPTables, Backend::IP6Tables}) {
    DiagSink diags;
    auto r = compile_iptables_from_prior(*s, *s, be, {}, diags);
    RC_ASSERT(r.has_value());
    RC_ASSERT(r->partial);
    RC_ASSERT(r->changed_services.empty());
    for (const char* prefix : {"\n:KUBE-SVC-", "\n:KUBE-SEP-", "\n:KUBE-EXT-", "\n:KUBE-FW-", "\n:KUBE-SVL-", "\n-X "})
      RC_ASSERT(r->text.find(prefix) == std::string::npos);
  }
}

}  // namespace kpc::test
