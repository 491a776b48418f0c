// Every way a snapshot can be given to the loader: multi-document YAML, single
// objects, `kind: List` (YAML and JSON), typed lists, several files, directories,
// skipped kinds, empty documents, missing inputs and the size limit.
#include <gtest/gtest.h>

#include "tests/support/snapshot_gen.h"
#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {

using loadtest::load_files;
using loadtest::load_json;
using loadtest::load_paths;
using loadtest::load_yaml;
using loadtest::TempDir;

const char* kWeb = R"(apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.0.10
  ports: [{port: 80}]
)";

const char* kNodeA = R"(apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  addresses: [{type: InternalIP, address: 192.168.0.10}]
)";

std::vector<std::string> service_keys(const Snapshot& s) {
  std::vector<std::string> out;
  for (const auto& x : s.services) out.push_back(x.meta.key());
  return out;
}

TEST(LoaderInputs, MultiDocumentYaml) {
  std::string text = std::string("# leading comment\n---\n") + kWeb + "---\n" + kNodeA +
                     "...\n---\napiVersion: v1\nkind: Service\nmetadata: {name: api}\nspec:\n  clusterIP: 10.96.0.11\n"
                     "  ports: [{port: 443}]\n---\n";
  auto l = load_yaml(text);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.documents, 3u);
  EXPECT_EQ(service_keys(l.snap), (std::vector<std::string>{"default/api", "shop/web"}));  // sorted
  ASSERT_EQ(l.snap.nodes.size(), 1u);
  EXPECT_EQ(l.snap.nodes[0].meta.key(), "node-a");
  EXPECT_EQ(l.snap.nodes[0].node_ip(IPFamily::V4)->str(), "192.168.0.10");
  EXPECT_TRUE(l.diags.all().empty()) << l.rendered();
}

TEST(LoaderInputs, ObjectPositionsPointAtEachDocument) {
  std::string text = std::string(kWeb) + "---\n" + kNodeA;
  auto l = load_yaml(text);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.services[0].meta.pos, (Pos{1, 1, 1}));
  EXPECT_EQ(l.snap.nodes[0].meta.pos, loadtest::pos_of(text, "apiVersion", 1));
  EXPECT_EQ(l.snap.services[0].meta.fields.at("spec.clusterIP"), loadtest::pos_of(text, "10.96.0.10"));
  EXPECT_EQ(l.snap.services[0].meta.fields.at("spec.ports[0].port"), loadtest::pos_of(text, "80"));
}

TEST(LoaderInputs, SingleObjectYamlAndJson) {
  auto y = load_yaml(kWeb);
  ASSERT_TRUE(y.ok) << y.rendered();
  EXPECT_EQ(y.snap.documents, 1u);
  ASSERT_EQ(y.snap.services.size(), 1u);
  auto j = load_json(R"({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
                          "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}})");
  ASSERT_TRUE(j.ok) << j.rendered();
  EXPECT_EQ(testgen::dump_model(y.snap), testgen::dump_model(j.snap));
}

TEST(LoaderInputs, ListInYaml) {
  std::string text = R"(apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: shop}
  spec: {clusterIP: 10.96.0.10, ports: [{port: 80}]}
- apiVersion: v1
  kind: Node
  metadata: {name: node-a}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cm}
)";
  auto l = load_yaml(text);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.documents, 1u);
  EXPECT_EQ(l.snap.services.size(), 1u);
  EXPECT_EQ(l.snap.nodes.size(), 1u);
  EXPECT_EQ(l.snap.skipped_kinds, (std::map<std::string, size_t>{{"ConfigMap", 1}}));
  EXPECT_EQ(l.snap.services[0].meta.pos, loadtest::pos_of(text, "apiVersion", 1));
}

TEST(LoaderInputs, ListInJson) {
  std::string text = R"({"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
   "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}},
  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}
]})";
  auto l = load_json(text);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.documents, 1u);
  EXPECT_EQ(l.snap.services.size(), 1u);
  EXPECT_EQ(l.snap.nodes.size(), 1u);
  EXPECT_EQ(l.snap.services[0].meta.pos, (Pos{1, 2, 3}));
}

TEST(LoaderInputs, EmptyAndNullLists) {
  for (const char* text : {"apiVersion: v1\nkind: List\nitems: []\n", "apiVersion: v1\nkind: List\nitems:\n",
                           "apiVersion: v1\nkind: List\n", "apiVersion: v1\nkind: ServiceList\nitems: []\n"}) {
    auto l = load_yaml(text);
    EXPECT_TRUE(l.ok) << text << l.rendered();
    EXPECT_TRUE(l.snap.services.empty());
  }
}

TEST(LoaderInputs, TypedListsMayOmitItemKind) {
  std::string text = R"(apiVersion: v1
kind: ServiceList
items:
- metadata: {name: web, namespace: shop}
  spec: {clusterIP: 10.96.0.10, ports: [{port: 80}]}
- metadata: {name: api, namespace: shop}
  spec: {clusterIP: 10.96.0.11, ports: [{port: 443}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSliceList
items:
- metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
  addressType: IPv4
  endpoints: [{addresses: [10.244.0.5]}]
---
apiVersion: v1
kind: NodeList
items:
- metadata: {name: node-a}
- apiVersion: v1
  kind: Node
  metadata: {name: node-b}
)";
  auto l = load_yaml(text);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.documents, 3u);
  EXPECT_EQ(service_keys(l.snap), (std::vector<std::string>{"shop/api", "shop/web"}));
  ASSERT_EQ(l.snap.slices.size(), 1u);
  EXPECT_EQ(l.snap.slices[0].service_name(), "web");
  ASSERT_EQ(l.snap.nodes.size(), 2u);
  EXPECT_EQ(l.snap.nodes[0].meta.name, "node-a");
  EXPECT_EQ(l.snap.nodes[0].meta.pos, loadtest::pos_of(text, "metadata: {name: node-a}"));
}

TEST(LoaderInputs, TypedListWithWrongApiVersion) {
  std::string text = "apiVersion: v2\nkind: ServiceList\nitems:\n- metadata: {name: web}\n  spec: {ports: [{port: 80}]}\n";
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  // The item inherits the list's apiVersion; the error points at the item.
  EXPECT_TRUE(loadtest::has_diag(l, DiagCode::UnsupportedVersion, "Service", "apiVersion", loadtest::pos_of(text, "metadata")));
}

TEST(LoaderInputs, TypedListOfUnknownKindIsSkipped) {
  auto l = load_yaml("apiVersion: apps/v1\nkind: DeploymentList\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n");
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.skipped_kinds, (std::map<std::string, size_t>{{"Deployment", 2}}));
}

TEST(LoaderInputs, SkippedKindsAreCounted) {
  std::string text = R"(apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec: {this: [is, not, validated]}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
- {apiVersion: v1, kind: Secret, data: {}}
)";
  auto l = load_yaml(text);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.skipped_kinds, (std::map<std::string, size_t>{{"ConfigMap", 2}, {"Deployment", 1}, {"Secret", 1}}));
  EXPECT_EQ(l.snap.documents, 3u);
  EXPECT_TRUE(l.snap.services.empty());
}

TEST(LoaderInputs, SkippedKindNamesAreBoundedAndPrintable) {
  std::string kind = "Evil\\nKind" + std::string(200, 'x');
  auto l = load_yaml("apiVersion: v1\nkind: \"" + kind + "\"\n");
  ASSERT_TRUE(l.ok) << l.rendered();
  ASSERT_EQ(l.snap.skipped_kinds.size(), 1u);
  const std::string& key = l.snap.skipped_kinds.begin()->first;
  EXPECT_EQ(key.find('\n'), std::string::npos);
  EXPECT_LE(key.size(), 100u);
}

TEST(LoaderInputs, EmptyDocumentsAreDropped) {
  for (const char* text : {"", "\n\n", "# only a comment\n", "---\n", "---\n---\n---\n", "---\n...\n", "--- ~\n",
                           "--- null\n"}) {
    auto l = load_yaml(text);
    EXPECT_TRUE(l.ok) << "\"" << text << "\"\n" << l.rendered();
    EXPECT_EQ(l.snap.documents, 0u) << text;
    EXPECT_TRUE(l.diags.all().empty()) << l.rendered();
  }
  std::string text = std::string("---\n---\n") + kWeb + "---\n\n---\n";
  auto l = load_yaml(text);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.documents, 1u);
  EXPECT_EQ(l.snap.services[0].meta.pos, (Pos{1, 3, 1}));
}

TEST(LoaderInputs, EmptyJsonFileIsASyntaxError) {
  auto l = load_json("");
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(loadtest::has_diag(l, DiagCode::JsonSyntax, "", "", Pos{1, 1, 1}));
}

TEST(LoaderInputs, FormatIsChosenByNameThenContent) {
  std::string json = R"({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})";
  // JSON is valid YAML: a .yaml file holding JSON loads the same.
  auto as_yaml = load_files({{"x.yaml", json}});
  auto as_json = load_files({{"x.json", json}});
  auto sniffed = load_files({{"<stdin>", "\n  " + json}});
  ASSERT_TRUE(as_yaml.ok) << as_yaml.rendered();
  ASSERT_TRUE(as_json.ok) << as_json.rendered();
  ASSERT_TRUE(sniffed.ok) << sniffed.rendered();
  EXPECT_EQ(testgen::dump_model(as_yaml.snap), testgen::dump_model(as_json.snap));
  EXPECT_EQ(testgen::dump_model(sniffed.snap), testgen::dump_model(as_json.snap));
  // Sniffed as JSON (no extension, starts with '{'): JSON syntax errors, not YAML ones.
  auto bad = load_files({{"<stdin>", "{\"a\": 1,}"}});
  EXPECT_TRUE(bad.first(DiagCode::JsonSyntax)) << bad.rendered();
  // A .json file is read as JSON even if it looks like YAML.
  auto yaml_in_json = load_files({{"x.json", kWeb}});
  EXPECT_TRUE(yaml_in_json.first(DiagCode::JsonSyntax)) << yaml_in_json.rendered();
}

TEST(LoaderInputs, SeveralFilesFormOneSnapshot) {
  auto l = load_paths(loadtest::example_files());
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(service_keys(l.snap), (std::vector<std::string>{"kube-system/kube-dns", "shop/api", "shop/cart", "shop/db",
                                                             "shop/payments", "shop/web"}));
  EXPECT_EQ(l.snap.slices.size(), 5u);
  EXPECT_EQ(l.snap.nodes.size(), 2u);
  EXPECT_TRUE(l.snap.config.present);
  EXPECT_TRUE(l.snap.env.present);
  EXPECT_EQ(l.snap.skipped_kinds, (std::map<std::string, size_t>{{"ConfigMap", 1}}));
  EXPECT_EQ(l.sm.size(), 4u);
  // Diagnostics and positions name the file each object came from.
  const Service& web = l.snap.services.back();
  EXPECT_EQ(l.sm.name(web.meta.pos.file), loadtest::example_files()[0]);
  EXPECT_EQ(l.sm.name(l.snap.slices[0].meta.pos.file), loadtest::example_files()[1]);
  // The model holds what the files say.
  EXPECT_EQ(web.cluster_ips.size(), 2u);
  EXPECT_EQ(web.cluster_ips[1].str(), "fd00:10:96::a");
  EXPECT_EQ(web.ports[0].node_port, 30080);
  EXPECT_EQ(l.snap.config.hostname_override, "node-a");
  EXPECT_EQ(l.snap.config.cluster_cidrs.size(), 2u);
  EXPECT_EQ(l.snap.env.interfaces.size(), 2u);
}

TEST(LoaderInputs, DirectoryIsScannedRecursivelyInNameOrder) {
  TempDir dir;
  auto files = loadtest::example_files();
  dir.write("b/services.yaml", test::read_file(files[0]));
  dir.write("a/slices.json", test::read_file(files[1]));
  dir.write("nodes.yml", test::read_file(files[2]));
  dir.write("c/d/kube-proxy.yaml", test::read_file(files[3]));
  dir.write("README.md", "not: [a snapshot");   // ignored: not .yaml/.yml/.json
  dir.write("notes.txt", std::string("\0\0", 2));  // ignored
  dir.write("upper.YAML", "bad: [");             // ignored: extensions are case-sensitive
  auto l = load_paths({dir.str()});
  ASSERT_TRUE(l.ok) << l.rendered();
  ASSERT_EQ(l.sm.size(), 4u);
  EXPECT_EQ(l.sm.name(1), (dir.path() / "a/slices.json").string());
  EXPECT_EQ(l.sm.name(2), (dir.path() / "b/services.yaml").string());
  EXPECT_EQ(l.sm.name(3), (dir.path() / "c/d/kube-proxy.yaml").string());
  EXPECT_EQ(l.sm.name(4), (dir.path() / "nodes.yml").string());
  // Same model as the files given one by one.
  auto direct = load_paths(files);
  ASSERT_TRUE(direct.ok) << direct.rendered();
  EXPECT_EQ(testgen::dump_model(l.snap), testgen::dump_model(direct.snap));
}

TEST(LoaderInputs, ExampleFixtureDirectory) {
  auto dir = load_paths({test::source_path("fixtures/example")});
  ASSERT_TRUE(dir.ok) << dir.rendered();
  auto files = load_paths(loadtest::example_files());
  ASSERT_TRUE(files.ok) << files.rendered();
  EXPECT_EQ(testgen::dump_model(dir.snap), testgen::dump_model(files.snap));
  EXPECT_EQ(dir.snap.services.size(), 6u);
  EXPECT_EQ(dir.snap.slices.size(), 5u);
  EXPECT_EQ(dir.snap.nodes.size(), 2u);
}

TEST(LoaderInputs, HiddenFilesAndDirectoriesAreSkipped) {
  TempDir dir;
  dir.write("web.yaml", kWeb);
  dir.write(".case.yaml", "not: a [snapshot");
  dir.write(".git/objects/x.json", "{broken");
  dir.write("sub/.swp.yml", "- - -");
  auto l = load_paths({dir.str()});
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.sm.size(), 1u);
  EXPECT_EQ(l.snap.services.size(), 1u);
}

TEST(LoaderInputs, DirectoriesAndFilesMix) {
  TempDir a, b;
  a.write("web.yaml", kWeb);
  std::string node = b.write("node.yaml", kNodeA);
  auto l = load_paths({a.str(), node});
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.services.size(), 1u);
  EXPECT_EQ(l.snap.nodes.size(), 1u);
}

TEST(LoaderInputs, NoInput) {
  auto none = load_paths({});
  EXPECT_FALSE(none.ok);
  EXPECT_TRUE(loadtest::has_diag(none, DiagCode::NoInput, "", "", Pos{}));
  TempDir empty;
  empty.write("ignored.txt", "x");
  auto l = load_paths({empty.str()});
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(loadtest::has_diag(l, DiagCode::NoInput, "", "", Pos{}));
}

TEST(LoaderInputs, UnreadablePathIsReportedAndOtherFilesStillChecked) {
  TempDir dir;
  std::string good = dir.write("bad.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: Web}\nspec: {ports: [{port: 1}]}\n");
  std::string missing = (dir.path() / "missing.yaml").string();
  auto l = load_paths({missing, good});
  EXPECT_FALSE(l.ok);
  const Diagnostic* io = l.first(DiagCode::IoError);
  ASSERT_TRUE(io) << l.rendered();
  EXPECT_FALSE(io->pos.known());
  EXPECT_NE(io->message.find(missing), std::string::npos) << io->message;
  // Every error in one run: the readable file is still validated.
  EXPECT_TRUE(l.first(DiagCode::InvalidName)) << l.rendered();
}

TEST(LoaderInputs, SizeLimitIsExact) {
  std::string text = kWeb;
  LoadOptions at;
  at.max_input_size = text.size();
  auto ok = load_files({{"a.yaml", text}}, at);
  EXPECT_TRUE(ok.ok) << ok.rendered();
  LoadOptions below;
  below.max_input_size = text.size() - 1;
  auto big = load_files({{"a.yaml", text}}, below);
  EXPECT_FALSE(big.ok);
  EXPECT_TRUE(loadtest::has_diag(big, DiagCode::InputTooLarge, "", "", Pos{}));
  EXPECT_NE(big.first(DiagCode::InputTooLarge)->message.find("a.yaml"), std::string::npos);

  TempDir dir;
  std::string path = dir.write("a.yaml", text);
  auto f_ok = load_paths({path}, at);
  EXPECT_TRUE(f_ok.ok) << f_ok.rendered();
  auto f_big = load_paths({path}, below);
  EXPECT_FALSE(f_big.ok);
  ASSERT_TRUE(f_big.first(DiagCode::InputTooLarge)) << f_big.rendered();
  EXPECT_NE(f_big.first(DiagCode::InputTooLarge)->message.find(path), std::string::npos);
}

TEST(LoaderInputs, OneTooLargeFileDoesNotHideTheOthers) {
  LoadOptions small;
  small.max_input_size = 200;
  auto l = load_files({{"big.yaml", std::string(201, '#')}, {"ok.yaml", kWeb}}, small);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(l.first(DiagCode::InputTooLarge));
  EXPECT_EQ(l.snap.services.size(), 1u);  // ok.yaml was still loaded
}

}  // namespace
}  // namespace kpc
