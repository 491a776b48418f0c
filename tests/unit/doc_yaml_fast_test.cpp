// The fast YAML reader (doc_yaml_fast.cpp) against the yaml-cpp reader it must match
// exactly: for every input it either declines (reporting and producing nothing) or
// returns the same documents (kinds, texts, keys, every Pos), the same diagnostics and
// the same result. Inputs: every YAML file under fixtures/, tests/schema/corpus/ and tests/hostile/,
// the benchmark generator's kubectl-style output, and hand-written cases for every
// construct, every decline reason, and every error the fast path reports itself.
// tests/property/doc_yaml_fast_props_test.cpp adds random documents and mutations.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "compiler/model/doc.h"
#include "tests/support/test_util.h"

// The benchmark generator (bench/synthetic_cluster.cpp) is compiled into this test
// directly: the test suites are globbed and do not link kpc_bench_support, and the
// benchmarks are not built in every preset.
#include "bench/synthetic_cluster.cpp"

namespace kpc {
namespace {

namespace fs = std::filesystem;

struct ReadRun {
  bool ok = false;
  bool declined = false;
  std::string reason;  // why the fast path declined
  std::vector<DocNode> docs;
  std::vector<Diagnostic> diags;
};

ReadRun run_fast(const std::string& text, const ReadLimits& limits = {}) {
  SourceManager sm;
  uint32_t f = sm.add("t.yaml", text);
  DiagSink diags;
  ReadRun r;
  r.ok = read_yaml_fast(sm, f, limits, &r.docs, diags, &r.declined);
  r.reason = yaml_fast_decline_reason();
  r.diags = diags.all();
  return r;
}

ReadRun run_reference(const std::string& text, const ReadLimits& limits = {}) {
  SourceManager sm;
  uint32_t f = sm.add("t.yaml", text);
  DiagSink diags;
  ReadRun r;
  r.ok = read_yaml_reference(sm, f, limits, &r.docs, diags);
  r.diags = diags.all();
  return r;
}

std::string pos_str(const Pos& p) { return std::to_string(p.line) + ":" + std::to_string(p.col); }

std::string node_str(const DocNode& n) {
  std::string s = std::string(kind_name(n.kind)) + "@" + pos_str(n.pos);
  if (n.is_scalar()) s += " \"" + n.text + "\"";
  else s += " (" + std::to_string(n.items.size()) + " items)";
  return s;
}

// Compares two trees field by field, positions included; names the first difference.
::testing::AssertionResult same_tree(const DocNode& a, const DocNode& b, const std::string& path = "$") {
  auto differ = [&](const std::string& what) {
    return ::testing::AssertionFailure() << path << ": " << what << ": fast " << node_str(a) << " vs yaml-cpp "
                                         << node_str(b);
  };
  if (a.kind != b.kind) return differ("kind");
  if (a.pos != b.pos) return differ("position");
  if (a.text != b.text) return differ("text");
  if (a.items.size() != b.items.size()) return differ("item count");
  if (a.keys.size() != b.keys.size()) return differ("key count");
  for (size_t i = 0; i < a.keys.size(); ++i) {
    if (a.keys[i].name != b.keys[i].name)
      return differ("key " + std::to_string(i) + " \"" + a.keys[i].name + "\" vs \"" + b.keys[i].name + "\"");
    if (a.keys[i].pos != b.keys[i].pos)
      return differ("key \"" + a.keys[i].name + "\" at " + pos_str(a.keys[i].pos) + " vs " + pos_str(b.keys[i].pos));
  }
  for (size_t i = 0; i < a.items.size(); ++i) {
    std::string sub = a.is_map() ? path + "." + a.keys[i].name : path + "[" + std::to_string(i) + "]";
    if (auto r = same_tree(a.items[i], b.items[i], sub); !r) return r;
  }
  return ::testing::AssertionSuccess();
}

std::string diag_str(const Diagnostic& d) {
  return std::string(diag_info(d.code).code) + "@" + pos_str(d.pos) + " " + d.message;
}

// The differential check: success if the fast path declined cleanly or agrees exactly.
::testing::AssertionResult fast_agrees(const std::string& text, const ReadLimits& limits = {},
                                       bool* declined = nullptr) {
  ReadRun f = run_fast(text, limits);
  if (declined) *declined = f.declined;
  if (f.declined) {
    if (f.ok || !f.docs.empty() || !f.diags.empty())
      return ::testing::AssertionFailure() << "declined but produced output or diagnostics";
    if (f.reason.empty()) return ::testing::AssertionFailure() << "declined without a reason";
    return ::testing::AssertionSuccess();
  }
  ReadRun r = run_reference(text, limits);
  if (f.ok != r.ok) return ::testing::AssertionFailure() << "result: fast " << f.ok << " vs yaml-cpp " << r.ok;
  if (f.diags.size() != r.diags.size())
    return ::testing::AssertionFailure() << "diagnostic count: fast " << f.diags.size() << " vs yaml-cpp "
                                         << r.diags.size() << (r.diags.empty() ? "" : " (" + diag_str(r.diags[0]) + ")")
                                         << (f.diags.empty() ? "" : " (fast: " + diag_str(f.diags[0]) + ")");
  for (size_t i = 0; i < f.diags.size(); ++i) {
    const Diagnostic &a = f.diags[i], &b = r.diags[i];
    if (a.code != b.code || a.pos != b.pos || a.message != b.message || a.object != b.object || a.path != b.path)
      return ::testing::AssertionFailure() << "diagnostic: fast " << diag_str(a) << " vs yaml-cpp " << diag_str(b);
  }
  if (f.docs.size() != r.docs.size())
    return ::testing::AssertionFailure() << "document count: fast " << f.docs.size() << " vs yaml-cpp " << r.docs.size();
  for (size_t i = 0; i < f.docs.size(); ++i)
    if (auto res = same_tree(f.docs[i], r.docs[i], "doc" + std::to_string(i)); !res) return res;
  return ::testing::AssertionSuccess();
}

// Agrees *and* was not declined: the fast path covers this input.
::testing::AssertionResult fast_covers(const std::string& text, const ReadLimits& limits = {}) {
  bool declined = false;
  auto r = fast_agrees(text, limits, &declined);
  if (!r) return r;
  if (declined) return ::testing::AssertionFailure() << "declined: " << yaml_fast_decline_reason();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult fast_declines(const std::string& text, const std::string& reason_part,
                                         const ReadLimits& limits = {}) {
  ReadRun f = run_fast(text, limits);
  if (!f.declined) return ::testing::AssertionFailure() << "not declined";
  if (f.ok || !f.docs.empty() || !f.diags.empty())
    return ::testing::AssertionFailure() << "declined but produced output or diagnostics";
  if (f.reason.find(reason_part) == std::string::npos)
    return ::testing::AssertionFailure() << "declined for \"" << f.reason << "\", expected \"" << reason_part << "\"";
  return ::testing::AssertionSuccess();
}

std::vector<fs::path> yaml_files_under(const std::string& relative) {
  std::vector<fs::path> out;
  fs::path root = test::source_path(relative);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file() && (it->path().extension() == ".yaml" || it->path().extension() == ".yml"))
      out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

// ---- real inputs ----------------------------------------------------------------------

TEST(DocYamlFast, EveryFixtureIsCoveredAndAgrees) {
  auto files = yaml_files_under("fixtures");
  ASSERT_GT(files.size(), 100u);
  for (const auto& p : files) EXPECT_TRUE(fast_covers(test::read_file(p.string()))) << p;
}

TEST(DocYamlFast, SchemaCorpusAgrees) {
  auto files = yaml_files_under("tests/schema/corpus");
  size_t declined_count = 0;
  for (const auto& p : files) {
    bool declined = false;
    EXPECT_TRUE(fast_agrees(test::read_file(p.string()), {}, &declined)) << p;
    if (declined) ++declined_count;
    // kubectl's own output (including last-applied-configuration block scalars) is covered.
    if (p.filename().string().find("kubectl") != std::string::npos) {
      EXPECT_FALSE(declined) << p;
    }
  }
  // The corpus is hand-written Kubernetes YAML: nearly all of it is in the subset.
  EXPECT_LE(declined_count * 10, files.size()) << declined_count << " of " << files.size() << " declined";
}

TEST(DocYamlFast, HostileInputsAgree) {
  // Alias bombs, deep nesting, control characters, NUL bytes: mostly declined (and then
  // bounded by the yaml-cpp reader), never contradicted.
  for (const auto& p : yaml_files_under("tests/hostile")) EXPECT_TRUE(fast_agrees(test::read_file(p.string()))) << p;
}

TEST(DocYamlFast, BenchmarkGeneratorOutputIsCoveredAndAgrees) {
  std::string text = bench::synthetic_cluster_yaml({50, 3, 5});
  EXPECT_TRUE(fast_covers(text));
  ReadRun f = run_fast(text);
  EXPECT_TRUE(f.ok);
  EXPECT_EQ(f.docs.size(), 1u + 5u + 2u * 50u);
}

TEST(DocYamlFast, KubectlGetOutputIsCovered) {
  // `kubectl get svc,endpointslices -o yaml` for one Service: a List with items at the
  // same indentation as their key, managedFields, quoted strings, an empty map, and the
  // last-applied-configuration annotation as a block scalar.
  std::string text = R"(apiVersion: v1
items:
- apiVersion: v1
  kind: Service
  metadata:
    annotations:
      kubectl.kubernetes.io/last-applied-configuration: |
        {"apiVersion":"v1","kind":"Service","metadata":{"annotations":{},"name":"web","namespace":"shop"}}
    creationTimestamp: "2024-05-01T10:00:00Z"
    labels:
      app: web
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1:
        f:spec:
          f:ports:
            .: {}
            k:{"port":80,"protocol":"TCP"}:
              .: {}
      manager: kubectl-client-side-apply
      operation: Update
      time: "2024-05-01T10:00:00Z"
    name: web
    namespace: shop
    resourceVersion: "123456"
    uid: 0b8f3a6e-8d1c-4f2e-9a57-3c1d2b4e5f60
  spec:
    clusterIP: 10.96.10.10
    clusterIPs:
    - 10.96.10.10
    - fd00::a
    ports:
    - name: http
      port: 80
      protocol: TCP
      targetPort: 8080
    selector:
      app: web
    sessionAffinity: None
    type: ClusterIP
  status:
    loadBalancer: {}
- addressType: IPv4
  apiVersion: discovery.k8s.io/v1
  endpoints:
  - addresses:
    - 10.1.0.5
    conditions:
      ready: true
      serving: true
      terminating: false
    nodeName: node-1
    targetRef:
      kind: Pod
      name: web-7d4b9c-abcde
    zone: us-east-1a
  kind: EndpointSlice
  metadata:
    labels:
      kubernetes.io/service-name: web
    name: web-abcde
    namespace: shop
  ports:
  - name: http
    port: 8080
    protocol: TCP
kind: List
metadata:
  resourceVersion: ""
)";
  EXPECT_TRUE(fast_covers(text));
}

// ---- hand-written cases: constructs the fast path must cover ---------------------------

struct Case {
  const char* name;
  std::string text;
};

TEST(DocYamlFast, CoversEveryConstructOfTheSubset) {
  const std::vector<Case> cases = {
      {"block map", "a: 1\nb: two\n"},
      {"nested maps", "a:\n  b:\n    c: d\n  e: f\ng: h\n"},
      {"block seq", "- a\n- b\n"},
      {"indented seq under key", "a:\n  - x\n  - y\nb: 1\n"},
      {"kubectl seq at key indentation", "a:\n- x\n- y\nb: 1\n"},
      {"compact map in seq", "- a: 1\n  b: 2\n- c: 3\n"},
      {"compact map with wide dash", "-   a: 1\n    b: 2\n"},
      {"nested seq in seq", "- - a\n  - b\n- - - c\n"},
      {"seq of maps with nested seq", "- a:\n  - x\n  b: 1\n- c\n"},
      {"root indented", "  a: 1\n  b: 2\n"},
      {"root scalar", "hello world\n"},
      {"root quoted scalar", "'x'\n"},
      {"root flow seq", "[a, b]\n"},
      {"empty values", "a:\nb: 1\nc:\n"},
      {"empty value at eof without newline", "a: 1\nb:"},
      {"empty value before comment lines", "a: # c\n  # d\n\nb:\n"},
      {"empty value before marker", "a:\n---\nb:\n...\n"},
      {"empty seq items", "- \n- a\n-\n-"},
      {"empty item before nested", "-\n  - a\n-\n  b: 1\n"},
      {"null spellings", "a: ~\nb: null\nc: Null\nd: NULL\ne: nULL\n~: 1\n"},
      {"typing", "i: 80\nn: -1\np: +5\nz: 0\nf: 1.5\ng: .5\nh: 1.\nb: yes\nc: Off\nd: 080\ne: 1e3\nx: 0x1F\n"},
      {"plain with inner colon and hash", "a: http://x:80/p#frag\nb: a:b\nc: x#y\n"},
      {"plain with spaces", "key with spaces: value  with  spaces   \n"},
      {"plain with indicators inside", "a: b[0]{x},y!&*|>'\"%@\n"},
      {"ipv6", "a: ::1\nb: fd00::1\nc: ::ffff:10.0.0.1\nd:\n- ::1/128\n"},
      {"negative and dash", "a: -1\nb: -x\nc: -.5\n"},
      {"utf-8", "\xc3\xa9t\xc3\xa9: caf\xc3\xa9\nb: \"\xe2\x9c\x93\"\nc: [\xc3\xa9, '\xc3\xa9']\n"},
      {"single quoted", "a: 'it''s'\nb: ''\nc: ' x # y: z '\n"},
      {"double quoted escapes",
       "a: \"x\\ty\\n\\\"q\\\\ \\/ \\0 \\a\\b\\v\\f\\r\\e\\ \\'\"\nb: \"\\x41\\u00e9\\U0001F600\"\nc: \"\"\n"},
      {"quoted keys", "\"a b\": 1\n'c': 2\n\"\": 3\n"},
      {"spaces before colon", "a : 1\n\"b\"  : 2\n"},
      {"comments", "# head\na: 1 # c\n  # indented\nb: \"x\" # c\n# tail"},
      {"hash inside values", "a: x#y\nb: 'x # y'\n"},
      {"empty flow", "a: {}\nb: []\nc:\n- {}\n- []\n"},
      {"flow seq", "a: [x, \"y\", 'z', 1, ~, [n], {k: v}]\n"},
      {"flow map", "a: {type: InternalIP, address: 1.2.3.4}\n"},
      {"flow json style", "a: {\"k\":1, \"j\" :2, \"l\": [\"m\",\"n\"]}\n"},
      {"flow spacing", "a: [ x , y ]\nb: { k: v }\nc: [x,y]\n"},
      {"flow in seq", "- [a, b]\n- {c: d}\n"},
      {"literal block", "a: |\n  line 1\n    more\n  line 3\nb: 1\n"},
      {"literal strip and keep", "a: |-\n  x\n\n\nb: |+\n  y\n\n\nc: 1\n"},
      {"literal with empty and blank lines", "a: |\n\n  x\n\n     \n  y\n \n\nb: 1\n"},
      {"literal with comment-like lines", "a: | # header\n  # not a comment\n  k: v\n# comment\nb: 1\n"},
      {"literal in seq", "- |\n  x\n- |-\n   y\n- z\n"},
      {"literal at end without a line break", "a: |\n  x\n\n  y"},
      {"literal at eof after newline", "a: |\n  x\n"},
      {"documents", "---\na: 1\n---\n- b\n...\n--- # c\nc\n...\n"},
      {"empty documents", "---\n---\n...\n---\n# only a comment\n---\n"},
      {"document end then content", "a: 1\n...\nb: 2\n"},
      {"no documents", "# nothing\n\n"},
      {"empty input", ""},
      {"long key just under the limit", std::string(990, 'k') + ": v\n"},
  };
  for (const Case& c : cases) EXPECT_TRUE(fast_covers(c.text)) << c.name << ":\n" << c.text;
}

// ---- positions: where yaml-cpp puts its marks -------------------------------------------

TEST(DocYamlFast, PositionsFollowYamlCppMarks) {
  // Checked against fixed expectations (not only against yaml-cpp) so that the rules
  // the fast path encodes are written down.
  ReadRun r = run_fast("a:\nb:\n  - x\nc: 'q'\nd: [e, {f: g}]\ne: |\n  t\nf:\n  # c\n\ng:\n- \n-");
  ASSERT_FALSE(r.declined) << r.reason;
  ASSERT_EQ(r.docs.size(), 1u);
  const DocNode& m = r.docs[0];
  EXPECT_EQ(m.pos, (Pos{1, 1, 1}));                    // a block map: its first key
  EXPECT_EQ(m.get("a")->pos, (Pos{1, 2, 1}));          // empty value: the next token
  EXPECT_EQ(m.get("b")->pos, (Pos{1, 3, 3}));          // a block seq: its first dash
  EXPECT_EQ(m.get("b")->items[0].pos, (Pos{1, 3, 5}));
  EXPECT_EQ(m.get("c")->pos, (Pos{1, 4, 4}));          // quoted: the opening quote
  EXPECT_EQ(m.get("d")->pos, (Pos{1, 5, 4}));          // flow: the bracket
  EXPECT_EQ(m.get("d")->items[1].key_pos("f"), (Pos{1, 5, 9}));
  EXPECT_EQ(m.get("e")->pos, (Pos{1, 6, 4}));          // block scalar: the indicator
  EXPECT_EQ(m.get("f")->pos, (Pos{1, 11, 1}));         // after comments and blank lines
  EXPECT_EQ(m.get("g")->items[0].pos, (Pos{1, 13, 1}));
  EXPECT_EQ(m.get("g")->items[1].pos, (Pos{1, 13, 1}));  // at the end: column 1 of the last line
  EXPECT_TRUE(fast_agrees("a:\nb:\n  - x\nc: 'q'\nd: [e, {f: g}]\ne: |\n  t\nf:\n  # c\n\ng:\n- \n-"));
  // With a final newline the end-of-input mark moves to the line after it.
  ReadRun nl = run_fast("a:\n");
  ASSERT_FALSE(nl.declined);
  EXPECT_EQ(nl.docs[0].get("a")->pos, (Pos{1, 2, 1}));
}

// ---- errors the fast path reports itself ------------------------------------------------

TEST(DocYamlFast, DuplicateKeysMatchYamlCpp) {
  for (const char* text : {
           "a: 1\nb:\n  x: 1\n  y: 2\n  x: 3\n",       // nested
           "a: 1\na: 2\n",                             // root
           "m: {k: 1, j: 2, k: 3}\n",                  // flow
           "m: {80: a, \"80\": b}\n",                  // same text, different styles
           "~: 1\nnull: 2\n",                          // null keys are ""
           "- a: 1\n  a: 2\n- b: 1\n  b: 2\n",         // the first map to close wins
           "a:\n  x: 1\n  x: 2\na: 3\n",               // inner map closes first
           "ok: 1\n---\nd: 1\nd: 2\n---\nlater: 1\n",  // documents before the error are kept
       })
    EXPECT_TRUE(fast_covers(text)) << text;
  std::string many;
  for (int i = 0; i < 30; ++i) many += "k" + std::to_string(i) + ": v\n";
  many += "k7: again\nk3: again\n";
  EXPECT_TRUE(fast_covers(many));  // the sorting path of find_duplicate_key
  ReadRun r = run_fast("ok: 1\n---\nd: 1\nd: 2\n");
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.diags.size(), 1u);
  EXPECT_EQ(r.diags[0].code, DiagCode::DuplicateKey);
  EXPECT_EQ(r.diags[0].pos, (Pos{1, 4, 1}));
  EXPECT_EQ(r.docs.size(), 1u);
}

TEST(DocYamlFast, DepthLimitMatchesYamlCpp) {
  ReadLimits lim;
  lim.max_depth = 4;
  auto nest = [](int n) { return std::string(size_t(n), '[') + std::string(size_t(n), ']') + "\n"; };
  EXPECT_TRUE(fast_covers(nest(4), lim));
  EXPECT_TRUE(fast_covers(nest(5), lim));
  EXPECT_TRUE(fast_covers("a:\n b:\n  c:\n   d: 1\n", lim));
  EXPECT_TRUE(fast_covers("a:\n b:\n  c:\n   d:\n    e: 1\n", lim));
  EXPECT_TRUE(fast_covers("- - - - - x\n", lim));
  EXPECT_TRUE(fast_covers("a:\n b:\n  c: [{d: 1}]\n", lim));
  ReadRun r = run_fast("a:\n b:\n  c:\n   d:\n    e: 1\n", lim);
  ASSERT_EQ(r.diags.size(), 1u);
  EXPECT_EQ(r.diags[0].code, DiagCode::NestingTooDeep);
  EXPECT_EQ(r.diags[0].pos, (Pos{1, 5, 5}));
  EXPECT_TRUE(fast_covers(nest(64)));
  EXPECT_TRUE(fast_covers(nest(65)));
  // The first error wins, whichever kind it is.
  EXPECT_TRUE(fast_covers("a: 1\na: 2\nb: [[[[[x]]]]]\n", lim));
  EXPECT_TRUE(fast_covers("b: [[[[[x]]]]]\na: 1\na: 2\n", lim));
}

TEST(DocYamlFast, NodeLimitMatchesYamlCpp) {
  ReadLimits lim;
  for (size_t n : {1, 2, 3, 5, 8, 10, 11, 12, 13, 20}) {
    lim.max_nodes = n;
    EXPECT_TRUE(fast_covers("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\n", lim)) << n;
    EXPECT_TRUE(fast_covers("a:\n  b: [x, y]\n  c:\n  - z\n", lim)) << n;
    // Empty documents count one node each, as yaml-cpp hands the Builder a null.
    EXPECT_TRUE(fast_covers("---\n---\na: 1\n...\n...\n---\n- x\n---\n", lim)) << n;
    EXPECT_TRUE(fast_covers("a: |\n  x\nb: [c, {d: e}]\n", lim)) << n;
  }
}

TEST(DocYamlFast, ErrorsAfterASemanticErrorAreLeftToYamlCpp) {
  // yaml-cpp reports the first error it meets in its event order. A duplicate key is
  // found when its map closes; a syntax error inside the map comes first.
  auto first_code = [](const std::string& text) {
    SourceManager sm;
    uint32_t f = sm.add("t.yaml", text);
    DiagSink diags;
    std::vector<DocNode> docs;
    EXPECT_FALSE(read_yaml(sm, f, {}, &docs, diags)) << text;
    return diags.all().empty() ? DiagCode::IoError : diags.all()[0].code;
  };
  EXPECT_EQ(first_code("a: 1\na: 2\nb: *alias\n"), DiagCode::YamlSyntax);
  EXPECT_EQ(first_code("a: 1\na: 2\n---\nb: *alias\n"), DiagCode::DuplicateKey);
  // So the fast path reports its own errors only when the whole file is inside the
  // subset (then yaml-cpp cannot meet a syntax error anywhere); otherwise it declines,
  // even where the semantic error would come first.
  EXPECT_TRUE(fast_declines("a: 1\na: 2\nb: *alias\n", "unsupported start"));
  EXPECT_TRUE(fast_declines("a: 1\na: 2\n---\nb: *alias\n", "unsupported start"));
  EXPECT_TRUE(fast_declines("a: 1\na: 2\nb: c: d\n", "mapping key after"));
  EXPECT_TRUE(fast_covers("a: 1\na: 2\n---\nb: [[[x]]]\n"));
}

// ---- declines: one case per reason, plus syntax errors (always left to yaml-cpp) -------

TEST(DocYamlFast, DeclinesOutsideTheSubset) {
  struct Decl {
    std::string text;
    const char* reason;
  };
  const std::vector<Decl> cases = {
      {"\xef\xbb\xbf" "a: 1\n", "byte-order-mark byte"},
      {"\xfe\xff\x00a", "byte-order-mark byte"},
      {"a: 1\r\nb: 2\r\n", "control character"},
      {"a:\n\tb: 1\n", "control character"},  // tab indentation
      {"a: b\tc\n", "control character"},
      {std::string("a: b\0c\n", 7), "control character"},
      {"a: \x04\n", "control character"},  // yaml-cpp's end-of-stream byte
      {"%YAML 1.1\n---\na: 1\n", "directive"},
      {"---a\n", "not a marker"},
      {"--- a: 1\n", "after a complete value"},
      {"--- x\n", "after a complete value"},
      {"a: &x 1\nb: *x\n", "unsupported start"},  // anchor
      {"a: *x\n", "unsupported start"},           // alias
      {"a: !!str 1\n", "unsupported start"},      // tag
      {"a: >\n  folded\n", "unsupported start"},
      {"a: |2\n   x\n", "indentation indicator"},
      {"a: |x\n", "after a block scalar header"},
      {"a: |", "after a block scalar header"},
      {"a: |\nb: 1\n", "empty block scalar"},
      {"a: |\n   \n  x\n", "whitespace-only"},
      {"a: |\n  x\n  ", "spaces without a line break"},
      {"|\n  x\n", "block scalar at the root"},
      {"? a\n: b\n", "unsupported start"},  // complex key
      {": a\n", "unsupported start"},
      {"a: b\n  c\n", "indented deeper"},  // multi-line plain scalar
      {"a:\n  b\n  c\n", "indented deeper"},
      {"a: 'b\n  c'\n", "multi-line"},
      {"a: \"b\n  c\"\n", "multi-line"},
      {"a: \"b\\\n  c\"\n", "unsupported escape"},
      {"a: \"unterminated\n", "multi-line"},
      {"a: 'unterminated", "multi-line"},
      {"a: \"\\q\"\n", "unsupported escape"},
      {"a: \"\\N\\_\"\n", "unsupported escape"},  // yaml-cpp 0.7 emits raw bytes for these
      {"a: \"\\L\"\n", "unsupported escape"},
      {"a: \"\\x4\"\n", "bad hex digit"},
      {"a: \"\\uD800\"\n", "not a Unicode scalar"},
      {"<<: {a: 1}\n", "merge key"},
      {"a: {<<: {b: 1}}\n", "merge key"},
      {std::string(1001, 'k') + ": v\n", "longer than 1000"},
      {"a: [x, y,]\n", "trailing comma"},
      {"a: [x, , y]\n", "trailing comma or empty"},
      {"a: [x: 1]\n", "ended by ':'"},
      {"a: {x}\n", "flow key without"},
      {"a: {x: }\n", "unsupported start of a flow scalar"},
      {"a: {x:}\n", "empty value"},
      {"a: {x:1}\n", "flow key without"},
      {"a: [x\n  , y]\n", "ended by"},
      {"a: [x] y\n", "after a complete value"},
      {"a: \"x\" y\n", "after a complete value"},
      {"a: \"x\"#c\n", "after a complete value"},
      {"[a]: b\n", "after a complete value"},
      {"a: b: c\n", "mapping key after"},
      {"a: - b\n", "block sequence after"},
      {"- a\nb: 1\n", "after the root collection ended"},
      {"a: 1\n- b\n", "sequence entry where a key"},
      {"a: 1\n b: 2\n", "indented deeper"},
      {"a:\n    b: 1\n  c: 2\n", "indented deeper"},
      {"x\ny\n", "after a complete root"},
      {"[a]\n[b]\n", "after a complete root"},
      {"  a: 1\nb: 2\n", "after the root collection ended"},  // yaml-cpp reads two documents
      {"a: 1\nb\n", "plain scalar where a key"},
      {"a: 1\n'b'\n", "quoted scalar where a key"},
      {"a: -\n", "block sequence after"},
      {"a: --x\n", "unsupported start"},
      {"a: @x\n", "unsupported start"},
      {"a: `x\n", "unsupported start"},
      {"a: %x\n", "unsupported start"},
      {std::string(401, '[') + std::string(401, ']') + "\n", "deeper than 400"},
  };
  for (const auto& c : cases) {
    EXPECT_TRUE(fast_declines(c.text, c.reason)) << c.text;
    EXPECT_TRUE(fast_agrees(c.text)) << c.text;
  }
}

TEST(DocYamlFast, DeclineLeavesOutputAndDiagnosticsUntouched) {
  SourceManager sm;
  uint32_t f = sm.add("t.yaml", "a: 1\nb: &x 2\n");
  DiagSink diags;
  diags.report(DiagCode::YamlSyntax, Pos{f, 9, 9}, "", "", "earlier");
  std::vector<DocNode> docs(1);
  docs[0].text = "earlier";
  bool declined = false;
  EXPECT_FALSE(read_yaml_fast(sm, f, {}, &docs, diags, &declined));
  EXPECT_TRUE(declined);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, "earlier");
  EXPECT_EQ(diags.all().size(), 1u);
  // And read_yaml, which falls back, appends to what is there.
  EXPECT_TRUE(read_yaml(sm, f, {}, &docs, diags));
  EXPECT_EQ(docs.size(), 2u);
}

TEST(DocYamlFast, SyntaxErrorsAreAlwaysDeclined) {
  // yaml-cpp's messages and marks for syntax errors are its own: the fast path never
  // reports E0010, it declines and lets yaml-cpp do it.
  for (const char* text : {
           "a: b: c\n", "a: b\n  c: d\n", "[a, b]]\n", "key: \"\\q\"\n", "a: b\n\tc: d\n", "a: 1\nb: \"x",
           "a: [1, 2\n", "- a\n b\n- c\n", "a:\n  - b\n c: d\n", "a: 'x\n", "{a: 1\n", "a: }\n", "a: ]\n",
           "- a\n  - b\n", "a:\n- b\n  - c\n", "a: 1\n  - b\n", "\"a\nb\": 1\n", "a: 1\n:\n", "a:\n  b: 1\n c: 2\n",
       }) {
    ReadRun r = run_reference(text);
    ReadRun f = run_fast(text);
    if (!r.ok && !r.diags.empty() && r.diags[0].code == DiagCode::YamlSyntax) {
      EXPECT_TRUE(f.declined) << text;
    }
    EXPECT_TRUE(fast_agrees(text)) << text;
  }
}

// ---- the shared scalar rules ---------------------------------------------------------------

// resolve_plain as it was before it was shared (doc_yaml.cpp at the time the fast path
// was added): the shared version must type every scalar identically.
DocNode::Kind legacy_resolve_plain(const std::string& v) {
  for (const char* w : {"true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes", "YES", "no", "No", "NO", "on",
                        "On", "ON", "off", "Off", "OFF", "y", "Y", "n", "N"})
    if (v == w) return DocNode::Kind::Bool;
  std::string_view d = v;
  if (!d.empty() && (d[0] == '-' || d[0] == '+')) d.remove_prefix(1);
  bool digits = !d.empty();
  for (char c : d) digits = digits && c >= '0' && c <= '9';
  if (digits && (d.size() == 1 || d[0] != '0')) return DocNode::Kind::Int;
  bool has_digit = false, ok = !d.empty();
  size_t dots = 0;
  for (char c : d) {
    if (c >= '0' && c <= '9') has_digit = true;
    else if (c == '.') ++dots;
    else ok = false;
  }
  if (ok && has_digit && dots == 1) return DocNode::Kind::Float;
  return DocNode::Kind::String;
}

TEST(DocYamlFast, SharedPlainTypingMatchesTheOriginalRules) {
  std::vector<std::string> samples = {"", "0", "1", "-1", "+1", "-", "+", "00", "01", "-0", "1.", ".1", ".", "..", "1.2.3",
                                      "1e3", "0x1F", "true", "True", "TRUE", "tRue", "yes", "y", "Y", "n", "N", "no", "on",
                                      "ON", "Off", "offf", "o", "t", "f", "nul", "abc", "10.96.0.1", "::1", "-1.5", "+.5"};
  const std::string alphabet = "01.-+eynoftruaYNOFT ";
  uint32_t x = 12345;
  for (int i = 0; i < 20000; ++i) {  // short strings over the characters that matter
    std::string s;
    x = x * 1103515245u + 12345u;
    size_t len = (x >> 16) % 6;
    for (size_t j = 0; j < len; ++j) {
      x = x * 1103515245u + 12345u;
      s += alphabet[(x >> 16) % alphabet.size()];
    }
    samples.push_back(s);
  }
  for (const auto& s : samples) EXPECT_EQ(resolve_plain_scalar(s), legacy_resolve_plain(s)) << "\"" << s << "\"";
}

TEST(DocYamlFast, NullSpellingsMatchYamlCpp) {
  for (const char* s : {"~", "null", "Null", "NULL", "nULL", "NUll", "none", "None", "nil", "~~", "null0", "Nul"}) {
    ReadRun r = run_reference(std::string("v: ") + s + "\n");
    ASSERT_TRUE(r.ok) << s;
    EXPECT_EQ(r.docs[0].items[0].is_null(), is_yaml_null_plain(s)) << s;
    for (const std::string& text : {std::string("v: ") + s + "\n", std::string(s) + ": v\n", "- " + std::string(s) + "\n"})
      EXPECT_TRUE(fast_covers(text)) << text;
  }
}

}  // namespace
}  // namespace kpc
