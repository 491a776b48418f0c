// kubeadm's kube-proxy configuration (issue 13, section 3): the ConfigMap kube-system/kube-proxy,
// key config.conf, is read as a KubeProxyConfiguration document of the snapshot, with positions
// inside the ConfigMap's text; with an explicit KubeProxyConfiguration it is E0601; other
// ConfigMaps are skipped.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/test_util.h"
#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {
using loadtest::has_diag;
using loadtest::load_files;
using loadtest::load_json;
using loadtest::load_yaml;
using loadtest::pos_after;
using loadtest::pos_of;

const char* kConfigMap = R"(apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-proxy
  namespace: kube-system
data:
  config.conf: |-
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    clusterCIDR: 10.244.0.0/16
    mode: ""
    iptables:
      masqueradeBit: 15
    hostnameOverride: ""
  kubeconfig.conf: |-
    apiVersion: v1
    kind: Config
)";

std::string with(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST(KubeadmConfigMap, ConfigConfIsTheKubeProxyConfiguration) {
  auto l = load_yaml(kConfigMap);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_TRUE(l.snap.config.present);
  EXPECT_EQ(l.snap.config.iptables.masquerade_bit, 15);
  ASSERT_EQ(l.snap.config.cluster_cidrs.size(), 1u);
  EXPECT_EQ(l.snap.config.cluster_cidrs[0].str(), "10.244.0.0/16");
  // Positions are the ConfigMap file's own.
  EXPECT_EQ(l.snap.config.pos, pos_of(kConfigMap, "apiVersion: kubeproxy"));
  EXPECT_EQ(l.snap.config.fields.at("iptables.masqueradeBit"), pos_after(kConfigMap, "masqueradeBit: "));
  EXPECT_TRUE(l.snap.skipped_kinds.empty());
}

TEST(KubeadmConfigMap, ErrorsAreLocatedInsideTheEmbeddedText) {
  std::string text = with(kConfigMap, "masqueradeBit: 15", "masqueradeBit: 99");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidConfig, "KubeProxyConfiguration", "iptables.masqueradeBit",
                       pos_after(text, "masqueradeBit: ")));
  // A syntax error too.
  std::string broken = with(kConfigMap, "clusterCIDR: 10.244.0.0/16", "clusterCIDR: [10.244.0.0/16");
  auto b = load_yaml(broken);
  EXPECT_FALSE(b.ok);
  ASSERT_NE(b.first(DiagCode::YamlSyntax), nullptr) << b.rendered();
  EXPECT_EQ(b.first(DiagCode::YamlSyntax)->pos.file, 1u) << b.rendered();
  EXPECT_GE(b.first(DiagCode::YamlSyntax)->pos.line, 10u) << b.rendered();
}

TEST(KubeadmConfigMap, JsonStringsAreLocatedAtTheKey) {
  const char* json =
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kube-proxy","namespace":"kube-system"},)"
      R"("data":{"config.conf":"apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nbogus: 1\n"}})";
  auto l = load_json(json);
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.rendered().find("in.json:1:120 (ConfigMap kube-system/kube-proxy data.config.conf):3:1: "
                              "error[E0102]: KubeProxyConfiguration: bogus: unknown field \"bogus\""),
            std::string::npos)
      << l.rendered();
}

TEST(KubeadmConfigMap, ExplicitConfigurationTooIsMultipleConfigs) {
  auto l = load_files({{"a-cm.yaml", kConfigMap},
                       {"b-kp.yaml", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"}});
  EXPECT_FALSE(l.ok);
  const Diagnostic* d = l.first(DiagCode::MultipleConfigs);
  ASSERT_NE(d, nullptr) << l.rendered();
  ASSERT_EQ(d->notes.size(), 1u);
  EXPECT_EQ(d->notes[0], "the first one is at a-cm.yaml:8:5");
}

TEST(KubeadmConfigMap, OtherConfigMapsAreSkippedAndBadShapesReported) {
  auto other = load_yaml(with(kConfigMap, "name: kube-proxy", "name: kube-proxy-extra"));
  ASSERT_TRUE(other.ok) << other.rendered();
  EXPECT_FALSE(other.snap.config.present);
  EXPECT_EQ(other.snap.skipped_kinds.at("ConfigMap"), 1u);
  auto elsewhere = load_yaml(with(kConfigMap, "namespace: kube-system", "namespace: default"));
  ASSERT_TRUE(elsewhere.ok) << elsewhere.rendered();
  EXPECT_FALSE(elsewhere.snap.config.present);

  auto not_string = load_yaml(
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-proxy, namespace: kube-system}\ndata:\n"
      "  config.conf: {mode: iptables}\n");
  EXPECT_FALSE(not_string.ok);
  EXPECT_NE(not_string.find(DiagCode::WrongType, "data.config.conf"), nullptr) << not_string.rendered();

  auto wrong_kind = load_yaml(with(kConfigMap, "kind: KubeProxyConfiguration", "kind: Service"));
  EXPECT_FALSE(wrong_kind.ok);
  EXPECT_NE(wrong_kind.find(DiagCode::InvalidConfig, "data.config.conf"), nullptr) << wrong_kind.rendered();

  auto no_key = load_yaml(
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-proxy, namespace: kube-system}\ndata: {}\n");
  EXPECT_TRUE(no_key.ok) << no_key.rendered();
  EXPECT_NE(no_key.find(DiagCode::WarnIgnoredValue, "data"), nullptr) << no_key.rendered();
}

TEST(KubeadmConfigMapCli, CompilesAsTheSameDocumentWithNode) {
  namespace fs = std::filesystem;
  std::string a = test::temp_dir("cm"), b = test::temp_dir("cm");
  for (const auto& dir : {a, b})
    for (const char* f : {"services.yaml", "endpointslices.json", "nodes.yaml"})
      fs::copy_file(test::source_path(std::string("fixtures/example/") + f), dir + "/" + f);
  test::write_file(a + "/kube-proxy.yaml", kConfigMap);
  test::write_file(b + "/kube-proxy.yaml",
                   "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                   "clusterCIDR: 10.244.0.0/16\niptables: {masqueradeBit: 15}\n");
  auto from_cm = test::run({test::bin_path("kpc"), "compile", a, "--node", "node-b"});
  auto from_doc = test::run({test::bin_path("kpc"), "compile", b, "--node", "node-b"});
  ASSERT_EQ(from_cm.exit_code, 0) << from_cm.err;
  ASSERT_EQ(from_doc.exit_code, 0) << from_doc.err;
  EXPECT_EQ(from_cm.out, from_doc.out);
  EXPECT_NE(from_cm.out.find("0x00008000/0x00008000"), std::string::npos);
}

}  // namespace
}  // namespace kpc
