// One or more tests for every diagnostic code the loader can emit, each asserting the
// code, the object label, the field path and the FILE:LINE:COL position (not the prose).
// W0002 (node-missing) is emitted by the compiler's node selection, not the loader.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {

using loadtest::has_diag;
using loadtest::load_files;
using loadtest::load_json;
using loadtest::load_paths;
using loadtest::load_yaml;
using loadtest::Loaded;
using loadtest::pos_after;
using loadtest::pos_of;

const char* kWebObj = "Service default/web";

std::string svc(const std::string& spec, const std::string& name = "web", const std::string& extra = "") {
  return "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\n  namespace: default\nspec:\n" + spec + extra;
}
std::string slice(const std::string& body) {
  return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: s\n  namespace: default\n" + body;
}
std::string proxy_config(const std::string& body) {
  return "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n" + body;
}
std::string node_env(const std::string& body) { return "apiVersion: kpc.dev/v1alpha1\nkind: NodeEnvironment\n" + body; }

// ---------------------------------------------------------------- E00xx: files and syntax
TEST(DiagCodes, E0001_IoError) {
  auto l = load_paths({"/nonexistent/kpc/snapshot.yaml"});
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::IoError, "", "", Pos{}));
  EXPECT_NE(l.first(DiagCode::IoError)->message.find("/nonexistent/kpc/snapshot.yaml"), std::string::npos);
}

TEST(DiagCodes, E0002_InputTooLarge) {
  LoadOptions o;
  o.max_input_size = 10;
  auto l = load_files({{"big.yaml", "apiVersion: v1\n"}}, o);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::InputTooLarge, "", "", Pos{}));
  EXPECT_NE(l.first(DiagCode::InputTooLarge)->message.find("big.yaml"), std::string::npos);
}

TEST(DiagCodes, E0003_BinaryInput) {
  struct Case {
    std::string text;
    Pos pos;
  };
  for (const auto& c : std::vector<Case>{
           {std::string("apiVersion: v1\nkind: Serv\0ice\n", 30), {1, 2, 11}},
           {"apiVersion: v1\nkind: Service\x01\n", {1, 2, 14}},
           {"apiVersion: v1\n\x1b[31mkind: Service\n", {1, 2, 1}},
           {"apiVersion: v1\nkind: \"\xff\"\n", {1, 2, 8}},
           {"a: b\x7f\n", {1, 1, 5}},
           {"{\"kind\": \"\xc3\x28\"}", {1, 1, 11}},
       }) {
    auto l = load_files({{"x.yaml", c.text}});
    EXPECT_FALSE(l.ok);
    EXPECT_TRUE(has_diag(l, DiagCode::BinaryInput, "", "", c.pos));
    EXPECT_EQ(l.diags.all().size(), 1u) << l.rendered();  // nothing else is parsed
  }
}

TEST(DiagCodes, E0004_NoInput) {
  auto l = load_paths({});
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::NoInput, "", "", Pos{}));
}

TEST(DiagCodes, E0010_YamlSyntax) {
  std::string text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web: x\n";
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::YamlSyntax, "", "", pos_of(text, ": x")));
}

TEST(DiagCodes, E0011_JsonSyntax) {
  std::string text = "{\"apiVersion\": \"v1\",\n \"kind\": \"Service\",\n \"metadata\": {\"name\": \"web\",}}";
  auto l = load_json(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::JsonSyntax, "", "", pos_of(text, "}}")));
}

TEST(DiagCodes, E0012_NestingTooDeep) {
  std::string deep = std::string(70, '[') + std::string(70, ']') + "\n";
  auto y = load_yaml("a: " + deep);
  EXPECT_FALSE(y.ok);
  EXPECT_TRUE(has_diag(y, DiagCode::NestingTooDeep, "", "", Pos{1, 1, 3 + 64}));  // the 64th '[' (65th level)
  auto j = load_json("{\"a\": " + deep + "}");
  EXPECT_FALSE(j.ok);
  const Diagnostic* d = j.first(DiagCode::NestingTooDeep);
  ASSERT_TRUE(d) << j.rendered();
  EXPECT_EQ(d->pos.line, 1u);
  // The 64th '[' (col 70); off by one today, see DocJson.NestingLimitMatchesYaml.
  EXPECT_GE(d->pos.col, 70u);
  EXPECT_LE(d->pos.col, 71u);
}

TEST(DiagCodes, E0013_AliasLimit) {
  std::string text =
      "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
      "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
      "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
      "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
      "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
      "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  // Expansions so far: 110 + 1110 + 11110 + 111110 = 123440; each *e adds 111111, so the
  // eighth *e crosses the default limit of 1,000,000.
  EXPECT_TRUE(has_diag(l, DiagCode::AliasLimit, "", "", pos_of(text, "*e", 7)));
}

TEST(DiagCodes, E0014_DuplicateKey) {
  std::string text = svc("  ports: [{port: 80}]\n  type: NodePort\n  type: ClusterIP\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::DuplicateKey, "", "", pos_of(text, "type", 1)));
  std::string json = R"({"apiVersion": "v1", "kind": "Service", "kind": "Node"})";
  auto j = load_json(json);
  EXPECT_TRUE(has_diag(j, DiagCode::DuplicateKey, "", "", pos_of(json, "\"kind\"", 1)));
}

TEST(DiagCodes, E0020_MissingKind) {
  for (const char* text : {"apiVersion: v1\nmetadata: {name: x}\n", "kind: Service\nmetadata: {name: x}\n",
                           "apiVersion: v1\nkind: 5\n", "apiVersion: 1\nkind: Service\n", "apiVersion: v1\nkind:\n"}) {
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << text;
    EXPECT_TRUE(has_diag(l, DiagCode::MissingKind, "", "", Pos{1, 1, 1})) << text;
  }
  std::string list = "apiVersion: v1\nkind: List\nitems:\n- metadata: {name: x}\n";
  auto l = load_yaml(list);
  EXPECT_TRUE(has_diag(l, DiagCode::MissingKind, "", "", pos_of(list, "metadata")));
}

TEST(DiagCodes, E0021_UnsupportedVersion) {
  std::string text = "apiVersion: v2\nkind: Service\nmetadata: {name: web}\n";
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::UnsupportedVersion, "Service", "apiVersion", pos_of(text, "v2")));
  std::string es = "apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\n";
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::UnsupportedVersion, "EndpointSlice", "apiVersion", Pos{1, 1, 13}));
  std::string kp = "{\"kind\": \"KubeProxyConfiguration\", \"apiVersion\": \"kubeproxy.config.k8s.io/v1alpha2\"}";
  EXPECT_TRUE(has_diag(load_json(kp), DiagCode::UnsupportedVersion, "KubeProxyConfiguration", "apiVersion",
                       pos_of(kp, "\"kubeproxy")));
}

TEST(DiagCodes, E0022_NotAnObject) {
  auto scalar = load_yaml("--- 42\n");
  EXPECT_TRUE(has_diag(scalar, DiagCode::NotAnObject, "", "", Pos{1, 1, 5}));
  auto seq = load_yaml("- a\n- b\n");
  EXPECT_TRUE(has_diag(seq, DiagCode::NotAnObject, "", "", Pos{1, 1, 1}));
  auto json = load_json("  [1, 2]");
  EXPECT_TRUE(has_diag(json, DiagCode::NotAnObject, "", "", Pos{1, 1, 3}));
  std::string list = "apiVersion: v1\nkind: List\nitems:\n- 7\n- apiVersion: v1\n  kind: List\n  items: []\n";
  auto l = load_yaml(list);
  EXPECT_EQ(l.with(DiagCode::NotAnObject).size(), 2u) << l.rendered();
  EXPECT_EQ(l.with(DiagCode::NotAnObject)[0]->pos, pos_of(list, "7"));
  EXPECT_EQ(l.with(DiagCode::NotAnObject)[1]->pos, pos_of(list, "apiVersion", 1));  // nested List
}

// ---------------------------------------------------------------- E01xx: object shape
TEST(DiagCodes, E0100_WrongType) {
  std::string text = svc("  ports:\n  - name: a\n    port: 80\n  - name: b\n    port: \"81\"\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::WrongType, kWebObj, "spec.ports[1].port", pos_of(text, "\"81\"")));
  std::string spec_list = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: [a]\n";  // also E0101 spec.ports
  EXPECT_TRUE(has_diag(load_yaml(spec_list), DiagCode::WrongType, kWebObj, "spec", pos_of(spec_list, "[a]")));
  std::string items = "apiVersion: v1\nkind: List\nitems: 5\n";
  EXPECT_TRUE(has_diag(load_yaml(items), DiagCode::WrongType, "List", "items", pos_of(items, "5")));
  std::string labels = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels: {a: [x]}\n";
  EXPECT_TRUE(has_diag(load_yaml(labels), DiagCode::WrongType, "Node n1", "metadata.labels[a]", pos_of(labels, "[x]")));
}

TEST(DiagCodes, E0101_MissingField) {
  std::string text = svc("  ports:\n  - {name: a, port: 80}\n  - {name: b}\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::MissingField, kWebObj, "spec.ports[1].port", pos_of(text, "{name: b}")));

  std::string noname = "apiVersion: v1\nkind: Service\nmetadata:\n  namespace: x\nspec: {ports: [{port: 1}]}\n";
  EXPECT_TRUE(has_diag(load_yaml(noname), DiagCode::MissingField, "Service <unnamed>", "metadata.name",
                       pos_of(noname, "namespace")));
  std::string nometa = "apiVersion: v1\nkind: Node\n";
  EXPECT_TRUE(has_diag(load_yaml(nometa), DiagCode::MissingField, "Node <unnamed>", "metadata.name", Pos{1, 1, 1}));

  std::string noports = svc("  clusterIP: 10.96.0.1\n");
  EXPECT_TRUE(has_diag(load_yaml(noports), DiagCode::MissingField, kWebObj, "spec.ports", pos_of(noports, "clusterIP")));

  std::string en = svc("  type: ExternalName\n");
  EXPECT_TRUE(has_diag(load_yaml(en), DiagCode::MissingField, kWebObj, "spec.externalName", pos_of(en, "type")));

  std::string es = slice("endpoints:\n- conditions: {ready: true}\n- addresses: []\n");
  auto s = load_yaml(es);
  EXPECT_TRUE(has_diag(s, DiagCode::MissingField, "EndpointSlice default/s", "addressType", Pos{1, 1, 1}));
  EXPECT_TRUE(has_diag(s, DiagCode::MissingField, "EndpointSlice default/s", "endpoints[0].addresses",
                       pos_of(es, "conditions")));
  EXPECT_TRUE(has_diag(s, DiagCode::MissingField, "EndpointSlice default/s", "endpoints[1].addresses",
                       pos_of(es, "[]")));
  std::string hints = slice("addressType: IPv4\nendpoints:\n- addresses: [10.0.0.1]\n  hints: {forZones: [{nam: a}]}\n");
  EXPECT_TRUE(has_diag(load_yaml(hints), DiagCode::MissingField, "EndpointSlice default/s",
                       "endpoints[0].hints.forZones[0].name", pos_of(hints, "{nam")));
}

// Regression (found by this suite, fixed in 50ebcdf): ValidateService requires spec.ports
// unless the Service is headless or ExternalName; a Service with no spec at all has
// neither, and used to load cleanly.
TEST(DiagCodes, E0101_ServiceWithoutSpecNeedsPorts) {
  auto l = load_yaml("apiVersion: v1\nkind: Service\nmetadata: {name: web}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(l.find(DiagCode::MissingField, "spec.ports")) << l.rendered();
}

TEST(DiagCodes, E0102_UnknownField) {
  std::string text = proxy_config("iptables:\n  masqueradeBit: 14\n  masqueradeBitt: 15\nfoo: 1\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::UnknownField, "KubeProxyConfiguration", "iptables.masqueradeBitt",
                       pos_of(text, "masqueradeBitt")));
  EXPECT_TRUE(has_diag(l, DiagCode::UnknownField, "KubeProxyConfiguration", "foo", pos_of(text, "foo")));
  std::string env = node_env("kernel: {ver: \"6.1\"}\ninterfaces:\n- {name: eth0, addrs: []}\n");
  auto e = load_yaml(env);
  EXPECT_TRUE(has_diag(e, DiagCode::UnknownField, "NodeEnvironment", "kernel.ver", pos_of(env, "ver:")));
  EXPECT_TRUE(has_diag(e, DiagCode::UnknownField, "NodeEnvironment", "interfaces[0].addrs", pos_of(env, "addrs")));
  // Kubernetes kinds are decoded leniently: unknown fields are ignored.
  EXPECT_TRUE(load_yaml(svc("  ports: [{port: 80}]\n  whatever: 1\n")).ok);
}

TEST(DiagCodes, E0103_TooMany) {
  std::string text = svc("  clusterIPs: [10.0.0.1, \"fd00::1\", 10.0.0.2]\n  ports: [{port: 80}]\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::TooMany, kWebObj, "spec.clusterIPs", pos_of(text, "[10.0.0.1")));
  std::string fams = svc("  ipFamilies: [IPv4, IPv6, IPv4]\n  ports: [{port: 80}]\n");
  EXPECT_TRUE(has_diag(load_yaml(fams), DiagCode::TooMany, kWebObj, "spec.ipFamilies", pos_of(fams, "[IPv4")));

  std::string eps = "addressType: IPv4\nendpoints:\n";
  for (int i = 0; i < 1001; ++i) eps += "- addresses: [10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) + "]\n";
  std::string es = slice(eps);
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::TooMany, "EndpointSlice default/s", "endpoints", pos_of(es, "- addresses")));
  EXPECT_TRUE(load_yaml(slice(eps.substr(0, eps.rfind("- addresses")))).ok);  // exactly 1000

  std::string addrs = "addressType: IPv4\nendpoints:\n- addresses: [";
  for (int i = 0; i < 101; ++i) addrs += (i ? ", " : "") + ("10.0.0." + std::to_string(i));
  addrs += "]\n";
  std::string ea = slice(addrs);
  EXPECT_TRUE(has_diag(load_yaml(ea), DiagCode::TooMany, "EndpointSlice default/s", "endpoints[0].addresses",
                       pos_of(ea, "[10.0.0.0")));

  std::string ports = "addressType: IPv4\nports:\n";
  for (int i = 0; i < 101; ++i) ports += "- {name: p" + std::to_string(i) + ", port: " + std::to_string(i + 1) + "}\n";
  std::string ep = slice(ports);
  EXPECT_TRUE(has_diag(load_yaml(ep), DiagCode::TooMany, "EndpointSlice default/s", "ports", pos_of(ep, "- {name")));
}

// ---------------------------------------------------------------- E02xx: names and addresses
TEST(DiagCodes, E0200_InvalidName) {
  std::string text = svc("  ports: [{port: 80}]\n", "Web");
  EXPECT_TRUE(has_diag(load_yaml(text), DiagCode::InvalidName, "Service <invalid name>", "metadata.name",
                       pos_after(text, "name: ")));
  std::string digit = svc("  ports: [{port: 80}]\n", "1web");  // DNS-1035: must start with a letter
  EXPECT_TRUE(has_diag(load_yaml(digit), DiagCode::InvalidName, "Service <invalid name>", "metadata.name",
                       pos_after(digit, "name: ")));
  std::string ns = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: Shop}\nspec: {ports: [{port: 1}]}\n";
  EXPECT_TRUE(has_diag(load_yaml(ns), DiagCode::InvalidName, "Service <invalid namespace>", "metadata.namespace",
                       pos_of(ns, "Shop")));
  std::string node = "apiVersion: v1\nkind: Node\nmetadata: {name: node_1}\n";
  EXPECT_TRUE(has_diag(load_yaml(node), DiagCode::InvalidName, "Node <invalid name>", "metadata.name", pos_of(node, "node_1")));
  std::string es = slice("addressType: IPv4\nendpoints:\n- addresses: [10.0.0.1]\n  nodeName: Node-A\n");
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::InvalidName, "EndpointSlice default/s", "endpoints[0].nodeName",
                       pos_of(es, "Node-A")));
  std::string fqdn = slice("addressType: FQDN\nendpoints:\n- addresses: [\"bad_host.example\"]\n");
  EXPECT_TRUE(has_diag(load_yaml(fqdn), DiagCode::InvalidName, "EndpointSlice default/s", "endpoints[0].addresses[0]",
                       pos_of(fqdn, "\"bad_host")));
  std::string en = svc("  type: ExternalName\n  externalName: bad_name.example.com\n");
  EXPECT_TRUE(has_diag(load_yaml(en), DiagCode::InvalidName, kWebObj, "spec.externalName", pos_of(en, "bad_name")));
  std::string ho = proxy_config("hostnameOverride: bad_host\n");
  EXPECT_TRUE(has_diag(load_yaml(ho), DiagCode::InvalidName, "KubeProxyConfiguration", "hostnameOverride",
                       pos_of(ho, "bad_host")));
  std::string env = node_env("hostname: \"bad host\"\n");
  EXPECT_TRUE(has_diag(load_yaml(env), DiagCode::InvalidName, "NodeEnvironment", "hostname", pos_of(env, "\"bad")));
}

TEST(DiagCodes, E0200_HostnameOverrideIsTrimmedAndLowerCased) {
  auto l = load_yaml(proxy_config("hostnameOverride: \"  Node-A \"\n"));
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.config.hostname_override, "node-a");
}

TEST(DiagCodes, E0201_InvalidLabel) {
  std::string text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels:\n    \"bad key\": x\n    ok: -bad\n";
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidLabel, "Node n1", "metadata.labels[bad key]", pos_of(text, "\"bad key\"")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidLabel, "Node n1", "metadata.labels[ok]", pos_of(text, "-bad")));
  std::string es = slice("addressType: IPv4\nendpoints:\n- addresses: [10.0.0.1]\n  zone: \"zone a\"\n");
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::InvalidLabel, "EndpointSlice default/s", "endpoints[0].zone",
                       pos_of(es, "\"zone a\"")));
}

TEST(DiagCodes, E0202_InvalidIP) {
  std::string text = svc("  clusterIP: 10.0.0.300\n  externalIPs: [127.0.0.1, 0.0.0.0, \"1.2.3\"]\n  ports: [{port: 80}]\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidIP, kWebObj, "spec.clusterIP", pos_of(text, "10.0.0.300")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidIP, kWebObj, "spec.externalIPs[0]", pos_of(text, "127.0.0.1")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidIP, kWebObj, "spec.externalIPs[1]", pos_of(text, "0.0.0.0")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidIP, kWebObj, "spec.externalIPs[2]", pos_of(text, "\"1.2.3\"")));
  std::string unspec = svc("  clusterIPs: [\"::\"]\n  ports: [{port: 80}]\n");
  EXPECT_TRUE(has_diag(load_yaml(unspec), DiagCode::InvalidIP, kWebObj, "spec.clusterIPs[0]", pos_of(unspec, "\"::\"")));
  std::string es = slice("addressType: IPv4\nendpoints:\n- addresses: [bogus]\n");
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::InvalidIP, "EndpointSlice default/s", "endpoints[0].addresses[0]",
                       pos_of(es, "bogus")));
  std::string lb = svc("  type: LoadBalancer\n  loadBalancerIP: 1.2.3.4.5\n  ports: [{port: 80, nodePort: 30000}]\n",
                       "web", "status:\n  loadBalancer:\n    ingress:\n    - ip: 300.1.1.1\n");
  auto lbl = load_yaml(lb);
  EXPECT_TRUE(has_diag(lbl, DiagCode::InvalidIP, kWebObj, "spec.loadBalancerIP", pos_of(lb, "1.2.3.4.5")));
  EXPECT_TRUE(has_diag(lbl, DiagCode::InvalidIP, kWebObj, "status.loadBalancer.ingress[0].ip", pos_of(lb, "300.1.1.1")));
}

TEST(DiagCodes, E0202_NodeAddress) {
  std::string text = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  addresses:\n"
                     "  - {type: Hostname, address: not-an-ip}\n  - {type: InternalIP, address: 10.0.0.256}\n";
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  // Reported at the address entry (the decoder does not keep the value's own position).
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidIP, "Node n1", "status.addresses[1].address", pos_of(text, "{type: InternalIP")));
  EXPECT_EQ(l.with(DiagCode::InvalidIP).size(), 1u);  // Hostname addresses are not IPs
}

// Regression: every invalid pod CIDR was reported at `spec`, and spec.podCIDR as spec.podCIDRs[0].
TEST(DiagCodes, E0203_NodePodCIDRIsLocated) {
  std::string text = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec:\n  podCIDRs:\n  - 10.244.1.0/24\n  - bogus\n";
  EXPECT_TRUE(has_diag(load_yaml(text), DiagCode::InvalidCIDR, "Node n1", "spec.podCIDRs[1]", pos_of(text, "bogus")));
  std::string single = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec:\n  podCIDR: 10.244.1.0/33\n";
  EXPECT_TRUE(has_diag(load_yaml(single), DiagCode::InvalidCIDR, "Node n1", "spec.podCIDR", pos_of(single, "10.244")));
}

TEST(DiagCodes, E0203_InvalidCIDR) {
  std::string text = svc("  type: LoadBalancer\n  loadBalancerSourceRanges: [\" 10.0.0.0/8 \", 10.0.0.0/33]\n"
                         "  ports: [{port: 80, nodePort: 30000}]\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidCIDR, kWebObj, "spec.loadBalancerSourceRanges[1]", pos_of(text, "10.0.0.0/33")));
  EXPECT_FALSE(l.find(DiagCode::InvalidCIDR, "spec.loadBalancerSourceRanges[0]"));  // space padding is trimmed
  std::string cfg = proxy_config("clusterCIDR: 10.244.0.0/16,bogus\nnodePortAddresses: [10.0.0.0/8, 1.2.3.4]\n");
  auto c = load_yaml(cfg);
  EXPECT_TRUE(has_diag(c, DiagCode::InvalidCIDR, "KubeProxyConfiguration", "clusterCIDR", pos_of(cfg, "10.244.0.0/16,")));
  EXPECT_TRUE(has_diag(c, DiagCode::InvalidCIDR, "KubeProxyConfiguration", "nodePortAddresses[1]", pos_of(cfg, "1.2.3.4")));
  std::string env = node_env("interfaces:\n- name: eth0\n  addresses: [192.168.0.2/24, 192.168.0.3]\n");
  EXPECT_TRUE(has_diag(load_yaml(env), DiagCode::InvalidCIDR, "NodeEnvironment", "interfaces[0].addresses[1]",
                       pos_of(env, "192.168.0.3")));
}

TEST(DiagCodes, E0204_InvalidPortName) {
  std::string text = svc("  ports:\n  - {name: HTTP, port: 80, targetPort: http_alt}\n  - {name: b, port: 81, targetPort: \"8080\"}\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidPortName, kWebObj, "spec.ports[0].name", pos_of(text, "HTTP")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidPortName, kWebObj, "spec.ports[0].targetPort", pos_of(text, "http_alt")));
  // A quoted number is a name, and a name needs a letter.
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidPortName, kWebObj, "spec.ports[1].targetPort", pos_of(text, "\"8080\"")));
  std::string es = slice("addressType: IPv4\nports: [{name: Bad, port: 80}]\n");
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::InvalidPortName, "EndpointSlice default/s", "ports[0].name", pos_of(es, "Bad")));
}

// ---------------------------------------------------------------- E03xx: Service rules
TEST(DiagCodes, E0300_PortOutOfRange) {
  std::string text = svc("  type: NodePort\n  ports:\n  - name: http\n    port: 80\n  - name: big\n    port: 70000\n"
                         "    nodePort: 65536\n    targetPort: 0\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::PortOutOfRange, kWebObj, "spec.ports[1].port", pos_of(text, "70000")));
  EXPECT_TRUE(has_diag(l, DiagCode::PortOutOfRange, kWebObj, "spec.ports[1].nodePort", pos_of(text, "65536")));
  EXPECT_TRUE(has_diag(l, DiagCode::PortOutOfRange, kWebObj, "spec.ports[1].targetPort", pos_after(text, "targetPort: ")));
  // The documented rendering, verbatim.
  auto [line, col] = loadtest::line_col(text, "70000");
  EXPECT_NE(l.rendered().find("in.yaml:" + std::to_string(line) + ":" + std::to_string(col) +
                              ": error[E0300]: Service default/web: spec.ports[1].port: 70000 is out of range 1-65535\n"),
            std::string::npos)
      << l.rendered();
  std::string hc = svc("  type: LoadBalancer\n  externalTrafficPolicy: Local\n  healthCheckNodePort: -1\n"
                       "  ports: [{port: 80, nodePort: 30000}]\n");
  EXPECT_TRUE(has_diag(load_yaml(hc), DiagCode::PortOutOfRange, kWebObj, "spec.healthCheckNodePort", pos_of(hc, "-1")));
  std::string es = slice("addressType: IPv4\nports: [{name: a, port: 0}]\n");
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::PortOutOfRange, "EndpointSlice default/s", "ports[0].port", pos_of(es, "0}")));
}

TEST(DiagCodes, E0301_InvalidProtocol) {
  std::string text = svc("  ports: [{port: 80, protocol: tcp}]\n");
  EXPECT_TRUE(has_diag(load_yaml(text), DiagCode::InvalidProtocol, kWebObj, "spec.ports[0].protocol", pos_of(text, "tcp")));
  std::string es = slice("addressType: IPv4\nports: [{name: a, port: 80, protocol: HTTP}]\n");
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::InvalidProtocol, "EndpointSlice default/s", "ports[0].protocol",
                       pos_of(es, "HTTP")));
}

TEST(DiagCodes, E0302_InvalidValue) {
  std::string text = svc("  type: Foo\n  ipFamilies: [IPv5]\n  externalTrafficPolicy: Global\n  internalTrafficPolicy: Node\n"
                         "  sessionAffinity: Sticky\n  trafficDistribution: Anywhere\n  ports: [{port: 80}]\n",
                         "web", "status:\n  loadBalancer:\n    ingress: [{ip: 1.2.3.4, ipMode: Direct}]\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidEnum, kWebObj, "spec.type", pos_of(text, "Foo")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidEnum, kWebObj, "spec.ipFamilies[0]", pos_of(text, "IPv5")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidEnum, kWebObj, "spec.externalTrafficPolicy", pos_of(text, "Global")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidEnum, kWebObj, "spec.internalTrafficPolicy", pos_of(text, "Node")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidEnum, kWebObj, "spec.sessionAffinity", pos_of(text, "Sticky")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidEnum, kWebObj, "spec.trafficDistribution", pos_of(text, "Anywhere")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidEnum, kWebObj, "status.loadBalancer.ingress[0].ipMode", pos_of(text, "Direct")));
  std::string es = slice("addressType: IPv7\n");
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::InvalidEnum, "EndpointSlice default/s", "addressType", pos_of(es, "IPv7")));
}

TEST(DiagCodes, E0303_DuplicatePort) {
  std::string text = svc("  ports:\n  - {name: a, port: 80}\n  - {name: a, port: 81}\n  - {name: c, port: 80}\n"
                         "  - {name: d, port: 80, protocol: UDP}\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::DuplicatePort, kWebObj, "spec.ports[1].name", pos_of(text, "{name: a, port: 81}")));
  EXPECT_TRUE(has_diag(l, DiagCode::DuplicatePort, kWebObj, "spec.ports[2]", pos_of(text, "{name: c")));
  EXPECT_EQ(l.with(DiagCode::DuplicatePort).size(), 2u) << l.rendered();  // 80/UDP is distinct
  std::string es = slice("addressType: IPv4\nports: [{name: a, port: 80}, {name: a, port: 81}]\n");
  EXPECT_TRUE(has_diag(load_yaml(es), DiagCode::DuplicatePort, "EndpointSlice default/s", "ports[1].name",
                       pos_of(es, "{name: a, port: 81}")));
}

TEST(DiagCodes, E0304_PortNameRequired) {
  std::string text = svc("  ports:\n  - {name: a, port: 80}\n  - {port: 81}\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::PortNameRequired, kWebObj, "spec.ports[1].name", pos_of(text, "{port: 81}")));
  EXPECT_TRUE(load_yaml(svc("  ports:\n  - {port: 81}\n")).ok);  // one port may be unnamed
}

TEST(DiagCodes, E0305_FamilyMismatch) {
  struct Case {
    std::string spec, path, needle;
  };
  for (const auto& c : std::vector<Case>{
           {"  clusterIP: 10.0.0.1\n  clusterIPs: [10.0.0.2]\n", "spec.clusterIPs[0]", "[10.0.0.2]"},
           {"  clusterIPs: [10.0.0.1, 10.0.0.2]\n", "spec.clusterIPs", "[10.0.0.1"},
           {"  clusterIPs: [10.0.0.1]\n  ipFamilies: [IPv6]\n", "spec.ipFamilies[0]", "IPv6"},
           {"  ipFamilies: [IPv4, IPv4]\n", "spec.ipFamilies[1]", "IPv4]"},
           {"  clusterIPs: [10.0.0.1, \"fd00::1\"]\n  ipFamilyPolicy: SingleStack\n", "spec.ipFamilyPolicy", "SingleStack"},
           {"  clusterIPs: [10.0.0.1]\n  ipFamilyPolicy: RequireDualStack\n", "spec.ipFamilyPolicy", "RequireDualStack"},
           {"  clusterIPs: [None, 10.0.0.1]\n", "spec.clusterIPs[0]", "None"},
       }) {
    std::string text = svc(c.spec + "  ports: [{port: 80}]\n");
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << c.spec;
    EXPECT_TRUE(has_diag(l, DiagCode::FamilyMismatch, kWebObj, c.path, pos_of(text, c.needle))) << c.spec;
  }
  // Consistent dual-stack is fine either way round.
  auto ok = load_yaml(svc("  clusterIPs: [\"fd00::1\", 10.0.0.1]\n  ipFamilies: [IPv6, IPv4]\n"
                          "  ipFamilyPolicy: RequireDualStack\n  ports: [{port: 80}]\n"));
  ASSERT_TRUE(ok.ok) << ok.rendered();
  EXPECT_EQ(ok.snap.services[0].cluster_ips[0].family, IPFamily::V6);
}

TEST(DiagCodes, E0306_AffinityTimeout) {
  for (const char* v : {"0", "86401"}) {
    std::string text = svc(std::string("  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: ") +
                           v + "\n  ports: [{port: 80}]\n");
    EXPECT_TRUE(has_diag(load_yaml(text), DiagCode::AffinityTimeout, kWebObj,
                         "spec.sessionAffinityConfig.clientIP.timeoutSeconds", pos_after(text, "timeoutSeconds: ")))
        << v;
  }
  auto ok = load_yaml(svc("  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 86400}}\n"
                          "  ports: [{port: 80}]\n"));
  ASSERT_TRUE(ok.ok) << ok.rendered();
  EXPECT_EQ(ok.snap.services[0].affinity_timeout_seconds, 86400);
}

TEST(DiagCodes, E0307_FieldNotAllowed) {
  std::string ranges = svc("  type: NodePort\n  loadBalancerSourceRanges: [10.0.0.0/8]\n  ports: [{port: 80, nodePort: 30000}]\n");
  EXPECT_TRUE(has_diag(load_yaml(ranges), DiagCode::FieldNotAllowed, kWebObj, "spec.loadBalancerSourceRanges",
                       pos_of(ranges, "[10.0.0.0/8]")));
  std::string etp = svc("  externalTrafficPolicy: Local\n  ports: [{port: 80}]\n");
  EXPECT_TRUE(has_diag(load_yaml(etp), DiagCode::FieldNotAllowed, kWebObj, "spec.externalTrafficPolicy", pos_of(etp, "Local")));
  EXPECT_TRUE(load_yaml(svc("  externalTrafficPolicy: Local\n  externalIPs: [1.2.3.4]\n  ports: [{port: 80}]\n")).ok);
  std::string sac = svc("  sessionAffinityConfig:\n    clientIP: {timeoutSeconds: 10}\n  ports: [{port: 80}]\n");
  EXPECT_TRUE(has_diag(load_yaml(sac), DiagCode::FieldNotAllowed, kWebObj, "spec.sessionAffinityConfig",
                       pos_of(sac, "clientIP")));
  std::string mode = svc("  type: LoadBalancer\n  ports: [{port: 80, nodePort: 30000}]\n", "web",
                         "status:\n  loadBalancer:\n    ingress: [{hostname: lb.example.com, ipMode: Proxy}]\n");
  EXPECT_TRUE(has_diag(load_yaml(mode), DiagCode::FieldNotAllowed, kWebObj, "status.loadBalancer.ingress[0].ipMode",
                       pos_of(mode, "Proxy")));
}

// ---------------------------------------------------------------- E04xx / E05xx
TEST(DiagCodes, E0400_AddressTypeMismatch) {
  std::string text = slice("addressType: IPv4\nendpoints:\n- addresses: [10.0.0.1, \"fd00::1\"]\n");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::AddressTypeMismatch, "EndpointSlice default/s", "endpoints[0].addresses[1]",
                       pos_of(text, "\"fd00::1\"")));
  std::string v6 = slice("addressType: IPv6\nendpoints:\n- addresses: [10.0.0.1]\n");
  EXPECT_TRUE(has_diag(load_yaml(v6), DiagCode::AddressTypeMismatch, "EndpointSlice default/s",
                       "endpoints[0].addresses[0]", pos_of(v6, "10.0.0.1")));
}

TEST(DiagCodes, E0500_InvalidConfig) {
  struct Case {
    std::string body, path, needle;
  };
  for (const auto& c : std::vector<Case>{
           {"iptables: {masqueradeBit: 32}\n", "iptables.masqueradeBit", "32"},
           {"nftables: {masqueradeBit: -1}\n", "nftables.masqueradeBit", "-1"},
           {"mode: kernelspace\n", "mode", "kernelspace"},
           {"mode: userspace\n", "mode", "userspace"},
           {"clusterCIDR: 10.0.0.0/8,10.1.0.0/16\n", "clusterCIDR", "10.0.0.0/8,"},
           {"clusterCIDR: 10.0.0.0/8,fd00::/48,10.1.0.0/16\n", "clusterCIDR", "10.0.0.0/8,"},
           {"detectLocalMode: BridgeInterface\n", "detectLocal.bridgeInterface", "detectLocalMode"},
           {"detectLocalMode: InterfaceNamePrefix\n", "detectLocal.interfaceNamePrefix", "detectLocalMode"},
           {"detectLocalMode: Magic\n", "detectLocalMode", "Magic"},
           {"detectLocal: {bridgeInterface: \"br 0\"}\n", "detectLocal.bridgeInterface", "detectLocal:"},
           {"detectLocal: {interfaceNamePrefix: averyveryverylongname}\n", "detectLocal.interfaceNamePrefix", "detectLocal:"},
           {"nodePortAddresses: [primary, 10.0.0.0/8]\n", "nodePortAddresses[0]", "primary"},
           {"oomScoreAdj: 1001\n", "oomScoreAdj", "1001"},
           {"conntrack: {min: -1}\n", "conntrack.min", "-1"},
           {"ipvs: {scheduler: fifo}\n", "ipvs.scheduler", "fifo"},
       }) {
    std::string text = proxy_config(c.body);
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << c.body;
    EXPECT_TRUE(has_diag(l, DiagCode::InvalidConfig, "KubeProxyConfiguration", c.path, pos_of(text, c.needle))) << c.body;
  }
}

TEST(DiagCodes, E0501_InvalidDuration) {
  struct Case {
    std::string body, path, needle;
  };
  for (const auto& c : std::vector<Case>{
           {"iptables: {syncPeriod: \"30\"}\n", "iptables.syncPeriod", "\"30\""},
           {"iptables: {minSyncPeriod: -1s}\n", "iptables.minSyncPeriod", "-1s"},
           {"configSyncPeriod: 1d\n", "configSyncPeriod", "1d"},
           {"conntrack: {tcpEstablishedTimeout: 24 h}\n", "conntrack.tcpEstablishedTimeout", "24 h"},
           {"ipvs: {tcpTimeout: 1h1}\n", "ipvs.tcpTimeout", "1h1"},
       }) {
    std::string text = proxy_config(c.body);
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << c.body;
    EXPECT_TRUE(has_diag(l, DiagCode::InvalidDuration, "KubeProxyConfiguration", c.path, pos_of(text, c.needle))) << c.body;
  }
  // A number where a duration string is expected is a type error (as in kube-proxy's decoding).
  std::string num = proxy_config("iptables: {syncPeriod: 30}\n");
  EXPECT_TRUE(has_diag(load_yaml(num), DiagCode::WrongType, "KubeProxyConfiguration", "iptables.syncPeriod", pos_of(num, "30")));
}

// ---------------------------------------------------------------- E06xx: cross-object
TEST(DiagCodes, E0600_DuplicateObject) {
  std::string a = svc("  ports: [{port: 80}]\n");
  std::string b = "# again\n" + a;
  auto l = load_files({{"a.yaml", a}, {"b.yaml", b}});
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::DuplicateObject, kWebObj, "", Pos{2, 2, 1}));
  ASSERT_EQ(l.first(DiagCode::DuplicateObject)->notes.size(), 1u);
  EXPECT_EQ(l.first(DiagCode::DuplicateObject)->notes[0], "also defined at a.yaml:1:1");
  EXPECT_NE(l.rendered().find("\n  note: also defined at a.yaml:1:1\n"), std::string::npos) << l.rendered();

  std::string nodes = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n";
  EXPECT_TRUE(has_diag(load_yaml(nodes), DiagCode::DuplicateObject, "Node n1", "", Pos{1, 5, 1}));
  std::string slices = slice("addressType: IPv4\n") + "---\n" + slice("addressType: IPv6\n");
  EXPECT_TRUE(has_diag(load_yaml(slices), DiagCode::DuplicateObject, "EndpointSlice default/s", "", Pos{1, 8, 1}));
  // Same name in another namespace, or of another kind, is not a duplicate.
  std::string other = a + "---\n" + svc("  ports: [{port: 80}]\n").replace(a.find("default"), 7, "other") + "---\n" +
                      "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web}\naddressType: IPv4\n";
  auto ok = load_yaml(other);
  EXPECT_TRUE(ok.ok) << ok.rendered();
}

TEST(DiagCodes, E0601_MultipleConfigs) {
  std::string text = proxy_config("mode: iptables\n") + "---\n" + proxy_config("mode: nftables\n");
  auto l = load_files({{"kp.yaml", text}});
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::MultipleConfigs, "KubeProxyConfiguration", "", Pos{1, 5, 1}));
  ASSERT_EQ(l.first(DiagCode::MultipleConfigs)->notes.size(), 1u);
  EXPECT_EQ(l.first(DiagCode::MultipleConfigs)->notes[0], "the first one is at kp.yaml:1:1");
  auto e = load_files({{"a.yaml", node_env("")}, {"b.yaml", node_env("hostname: b\n")}});
  EXPECT_TRUE(has_diag(e, DiagCode::MultipleConfigs, "NodeEnvironment", "", Pos{2, 1, 1}));
  EXPECT_EQ(e.first(DiagCode::MultipleConfigs)->notes.at(0), "the first one is at a.yaml:1:1");
}

TEST(DiagCodes, E0602_ClusterIPConflict) {
  std::string text = svc("  clusterIP: 10.96.0.10\n  ports: [{port: 80}]\n", "web") + "---\n" +
                     svc("  clusterIP: 10.96.0.10\n  ports: [{port: 80}]\n", "api");
  auto l = load_files({{"c.yaml", text}});
  EXPECT_FALSE(l.ok);
  // Checked in sorted order (api < web): the later Service gets the error, at its clusterIP.
  EXPECT_TRUE(has_diag(l, DiagCode::ClusterIPConflict, kWebObj, "spec.clusterIPs[0]", pos_of(text, "10.96.0.10", 0)));
  ASSERT_EQ(l.with(DiagCode::ClusterIPConflict).size(), 1u);
  EXPECT_NE(l.first(DiagCode::ClusterIPConflict)->message.find("default/api"), std::string::npos);
  EXPECT_EQ(l.first(DiagCode::ClusterIPConflict)->notes.at(0),
            "allocated at c.yaml:" + std::to_string(pos_of(text, "apiVersion", 1).line) + ":1");
  // Headless Services share "None" freely.
  std::string headless = svc("  clusterIP: None\n", "a") + "---\n" + svc("  clusterIP: None\n", "b");
  EXPECT_TRUE(load_yaml(headless).ok);
}

// Regression: the conflict was always located at spec.clusterIP (or `spec`), whatever the entry.
TEST(DiagCodes, E0602_ClusterIPConflictOnSecondFamilyIsLocated) {
  std::string a = svc("  clusterIP: 10.96.0.1\n  clusterIPs: [10.96.0.1, \"fd00::a\"]\n  ipFamilyPolicy: PreferDualStack\n"
                      "  ports: [{port: 80}]\n", "web");
  std::string b = svc("  clusterIPs: [\"fd00::b\", 10.96.0.2]\n  ports: [{port: 80}]\n", "api");
  std::string text = b + "---\n" + a + "---\n" + svc("  clusterIPs: [\"fd00::b\"]\n  ports: [{port: 80}]\n", "zed");
  auto l = load_yaml(text);
  EXPECT_TRUE(has_diag(l, DiagCode::ClusterIPConflict, "Service default/zed", "spec.clusterIPs[0]",
                       pos_of(text, "\"fd00::b\"", 1)));
  std::string c = svc("  clusterIPs: [10.96.0.3, \"fd00::a\"]\n  ipFamilyPolicy: PreferDualStack\n  ports: [{port: 80}]\n", "xyz");
  std::string t2 = a + "---\n" + c;
  EXPECT_TRUE(has_diag(load_yaml(t2), DiagCode::ClusterIPConflict, "Service default/xyz", "spec.clusterIPs[1]",
                       pos_of(t2, "\"fd00::a\"", 1)));
}

TEST(DiagCodes, E0603_NodePortConflict) {
  std::string text = svc("  type: NodePort\n  ports: [{name: a, port: 80, nodePort: 30080}, {name: b, port: 53, protocol: UDP, nodePort: 30053}]\n", "web") +
                     "---\n" +
                     svc("  type: NodePort\n  ports: [{name: a, port: 80, nodePort: 30080}, {name: b, port: 53, nodePort: 30053}]\n", "api");
  auto l = load_files({{"np.yaml", text}});
  EXPECT_FALSE(l.ok);
  ASSERT_EQ(l.with(DiagCode::NodePortConflict).size(), 1u) << l.rendered();  // 30053 TCP vs UDP: no conflict
  // Reported at the port entry of the later Service (sorted: api < web).
  EXPECT_TRUE(has_diag(l, DiagCode::NodePortConflict, kWebObj, "spec.ports[0].nodePort",
                       pos_of(text, "{name: a, port: 80, nodePort: 30080}", 0)));
  EXPECT_NE(l.first(DiagCode::NodePortConflict)->message.find("30080/TCP"), std::string::npos);
  EXPECT_EQ(l.first(DiagCode::NodePortConflict)->notes.at(0),
            "allocated at np.yaml:" + std::to_string(pos_of(text, "apiVersion", 1).line) + ":1");
}

// ---------------------------------------------------------------- warnings
TEST(DiagCodes, W0001_LegacyIP) {
  std::string text = svc("  clusterIP: 010.096.000.010\n  type: LoadBalancer\n  loadBalancerSourceRanges: [010.0.0.0/8, 10.0.0.0/08]\n"
                         "  ports: [{port: 80, nodePort: 30000}]\n");
  auto l = load_yaml(text);
  ASSERT_TRUE(l.ok) << l.rendered();  // warnings only
  EXPECT_TRUE(has_diag(l, DiagCode::WarnLegacyIP, kWebObj, "spec.clusterIP", pos_of(text, "010.096")));
  EXPECT_TRUE(has_diag(l, DiagCode::WarnLegacyIP, kWebObj, "spec.loadBalancerSourceRanges[0]", pos_of(text, "010.0.0.0/8")));
  EXPECT_TRUE(has_diag(l, DiagCode::WarnLegacyIP, kWebObj, "spec.loadBalancerSourceRanges[1]", pos_of(text, "10.0.0.0/08")));
  EXPECT_EQ(l.snap.services[0].cluster_ips[0].str(), "10.96.0.10");
  EXPECT_EQ(l.snap.services[0].load_balancer_source_ranges[1].str(), "10.0.0.0/8");
  EXPECT_NE(l.rendered().find("warning[W0001]"), std::string::npos);
}

TEST(DiagCodes, W0003_IgnoredValue) {
  std::string text = svc("  ports:\n  - {port: 80, nodePort: 30080}\n");
  auto l = load_yaml(text);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_TRUE(has_diag(l, DiagCode::WarnIgnoredValue, kWebObj, "spec.ports[0].nodePort", pos_of(text, "{port: 80")));
  EXPECT_EQ(l.snap.services[0].ports[0].node_port, 30080);  // kept: kube-proxy serves it
  std::string hc = svc("  type: NodePort\n  healthCheckNodePort: 32000\n  ports: [{port: 80, nodePort: 30080}]\n");
  auto h = load_yaml(hc);
  ASSERT_TRUE(h.ok) << h.rendered();
  EXPECT_TRUE(has_diag(h, DiagCode::WarnIgnoredValue, kWebObj, "spec.healthCheckNodePort", pos_of(hc, "32000")));
}

// ---------------------------------------------------------------- every error, sorted
TEST(DiagCodes, AllErrorsAreReportedInLocationOrder) {
  std::string a = svc("  ports:\n  - {name: a, port: 0}\n  - {name: a, port: 70000, protocol: tcp}\n", "Web") + "---\n" +
                  slice("addressType: IPv4\nendpoints:\n- addresses: [bogus, \"fd00::1\"]\n") + "---\n" +
                  proxy_config("iptables: {masqueradeBit: 99, syncPeriod: 1x}\n");
  std::string b = "apiVersion: v1\nkind: Node\nmetadata: {name: BAD}\n";
  auto l = load_files({{"z.yaml", a}, {"a.yaml", b}});  // file order, not name order
  EXPECT_FALSE(l.ok);
  std::vector<std::string> codes = l.codes();
  EXPECT_EQ(codes, (std::vector<std::string>{"E0200", "E0300", "E0303", "E0300", "E0301", "E0202", "E0400", "E0500",
                                             "E0501", "E0200"}))
      << l.rendered();
  for (size_t i = 1; i < l.diags.all().size(); ++i) EXPECT_LE(l.diags.all()[i - 1].pos, l.diags.all()[i].pos);
  EXPECT_EQ(l.diags.error_count(), codes.size());
  EXPECT_TRUE(loadtest::all_errors_located(l));
}

// ---------------------------------------------------------------- crashes (isolated)
// Regression (found by this suite, fixed in 50ebcdf): decode_cluster_ips() indexed
// cips_node->items[i] whenever spec.clusterIPs was present, even when the IPs came from
// spec.clusterIP: `clusterIP: X` plus `clusterIPs: []`, `clusterIPs: null` or
// `clusterIPs: "X"` read past an empty vector (SIGSEGV, in the CLI too).
// Run in a child process so a crash fails only this test.
void load_in_child_and_exit(const std::string& clusterips_line, bool expect_ok) {
  auto l = load_yaml(svc("  clusterIP: 10.0.0.1\n" + clusterips_line + "  ports: [{port: 80}]\n"));
  bool ok_as_expected = l.ok == expect_ok;
  if (expect_ok) ok_as_expected = ok_as_expected && l.snap.services.at(0).cluster_ips.size() == 1;
  std::_Exit(ok_as_expected ? 0 : 1);
}

TEST(DiagCodesDeathTest, EmptyOrNullClusterIPsDoNotCrash) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The API server defaults clusterIPs from clusterIP: both are valid and mean [10.0.0.1].
  EXPECT_EXIT(load_in_child_and_exit("  clusterIPs: []\n", true), ::testing::ExitedWithCode(0), "") << "clusterIPs: []";
  EXPECT_EXIT(load_in_child_and_exit("  clusterIPs:\n", true), ::testing::ExitedWithCode(0), "") << "clusterIPs: null";
  // A scalar is a type error (E0100), not a crash.
  EXPECT_EXIT(load_in_child_and_exit("  clusterIPs: 10.0.0.1\n", false), ::testing::ExitedWithCode(0), "")
      << "clusterIPs: scalar";
}

// Regression: str_list() re-indexed the strings after a non-string entry.
TEST(DiagCodes, E0202_ClusterIPsEntriesKeepTheirIndex) {
  std::string text = svc("  clusterIPs: [1, \"10.0.0.300\"]\n  ports: [{port: 80}]\n");
  auto l = load_yaml(text);
  EXPECT_TRUE(has_diag(l, DiagCode::WrongType, kWebObj, "spec.clusterIPs[0]", pos_of(text, "1,")));
  EXPECT_TRUE(has_diag(l, DiagCode::InvalidIP, kWebObj, "spec.clusterIPs[1]", pos_of(text, "\"10.0.0.300\"")));
}

}  // namespace
}  // namespace kpc
