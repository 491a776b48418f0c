// How YAML (1.1, as go-yaml v2 / the API server reads it) and JSON scalars are typed,
// observed through the loader: "80" is a string, 80 an integer, yes/no are booleans,
// leading-zero integers are strings.
#include <gtest/gtest.h>

#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {

using loadtest::has_diag;
using loadtest::load_json;
using loadtest::load_yaml;
using loadtest::pos_after;
using loadtest::pos_of;

std::string svc_with_port(const std::string& port_value) {
  return "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports:\n  - name: p\n    port: " + port_value +
         "\n";
}

TEST(YamlTyping, QuotedNumberIsAString) {
  std::string text = svc_with_port("\"80\"");
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::WrongType, "Service default/web", "spec.ports[0].port", pos_of(text, "\"80\"")));
  EXPECT_NE(l.first(DiagCode::WrongType)->message.find("string"), std::string::npos);
  // Single quotes and explicit !!str tags too.
  for (const char* v : {"'80'", "!!str 80", "! 80"}) {
    auto l2 = load_yaml(svc_with_port(v));
    EXPECT_TRUE(l2.find(DiagCode::WrongType, "spec.ports[0].port")) << v << "\n" << l2.rendered();
  }
}

TEST(YamlTyping, IntegersThatAreIntegers) {
  for (auto [text, want] : std::vector<std::pair<const char*, int>>{
           {"80", 80}, {"+80", 80}, {"65535", 65535}, {"1", 1}, {"!!int 443", 443}, {"!!int \"8080\"", 8080}}) {
    auto l = load_yaml(svc_with_port(text));
    ASSERT_TRUE(l.ok) << text << "\n" << l.rendered();
    EXPECT_EQ(l.snap.services[0].ports[0].port, want) << text;
  }
}

TEST(YamlTyping, LeadingZeroIntegersAreStrings) {
  // go-yaml would read 0755 as octal; kpc keeps such scalars strings so they fail loudly.
  for (const char* v : {"080", "00", "0080", "-01"}) {
    std::string text = svc_with_port(v);
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << v;
    EXPECT_TRUE(has_diag(l, DiagCode::WrongType, "Service default/web", "spec.ports[0].port", pos_after(text, "port: ")))
        << v;
  }
}

TEST(YamlTyping, OtherNonIntegersInAnIntegerField) {
  for (const char* v : {"80.0", "8e1", "0x50", "0o120", "8_0", "yes", "true", "[80]", "{a: 1}", ".inf", "eighty"}) {
    auto l = load_yaml(svc_with_port(v));
    EXPECT_FALSE(l.ok) << v;
    EXPECT_TRUE(l.find(DiagCode::WrongType, "spec.ports[0].port")) << v << "\n" << l.rendered();
  }
}

TEST(YamlTyping, NullMeansAbsent) {
  for (const char* v : {"~", "null", "Null", "NULL", ""}) {
    std::string text = svc_with_port(v);
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << v;
    EXPECT_TRUE(has_diag(l, DiagCode::MissingField, "Service default/web", "spec.ports[0].port", pos_of(text, "name: p")))
        << v;
  }
}

TEST(YamlTyping, HugeIntegersAreOutOfRangeNotWrapped) {
  for (const char* v : {"99999999999999999999999", "4294967376", "18446744073709551696", "-9223372036854775889"}) {
    std::string text = svc_with_port(v);
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << v;
    EXPECT_TRUE(has_diag(l, DiagCode::PortOutOfRange, "Service default/web", "spec.ports[0].port", pos_of(text, v)))
        << v;
  }
}

// BUG: explicit !!int / !!bool tags make the node an Int/Bool without checking the text,
// and ObjectReader::integer() then "parses" letters as digits: `port: !!int abc` loads
// as port 5451 with no error. go-yaml rejects "cannot decode !!str `abc` as a !!int".
TEST(YamlTyping, ExplicitTagsDoNotMakeGarbageValid) {
  for (const char* v : {"!!int abc", "!!int 0x50", "!!int 8_0", "!!int ''"}) {
    auto l = load_yaml(svc_with_port(v));
    EXPECT_FALSE(l.ok) << v << ": loaded port " << (l.snap.services.empty() ? 0 : l.snap.services[0].ports[0].port);
  }
  std::string slice = R"(apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s}
addressType: IPv4
endpoints:
- addresses: [10.0.0.1]
  conditions: {ready: !!bool maybe}
)";
  auto l = load_yaml(slice);
  EXPECT_FALSE(l.ok) << "ready: !!bool maybe loaded as "
                     << (l.snap.slices.empty() ? "?" : (*l.snap.slices[0].endpoints[0].ready ? "true" : "false"));
}

TEST(YamlTyping, Yaml11Booleans) {
  auto ready = [](const std::string& v) {
    auto l = load_yaml("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s}\naddressType: IPv4\n"
                       "endpoints:\n- addresses: [10.0.0.1]\n  conditions: {ready: " + v + "}\n");
    EXPECT_TRUE(l.ok) << v << "\n" << l.rendered();
    return l.ok ? l.snap.slices[0].endpoints[0].ready : std::nullopt;
  };
  for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"})
    EXPECT_EQ(ready(t), true) << t;
  for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"})
    EXPECT_EQ(ready(f), false) << f;
}

TEST(YamlTyping, NonBooleansInABooleanField) {
  for (const char* v : {"\"true\"", "'yes'", "1", "0", "tRUE", "yess", "[true]"}) {
    std::string text = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s}\naddressType: IPv4\n"
                       "endpoints:\n- addresses: [10.0.0.1]\n  conditions: {ready: " + std::string(v) + "}\n";
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << v;
    EXPECT_TRUE(has_diag(l, DiagCode::WrongType, "EndpointSlice default/s", "endpoints[0].conditions.ready",
                         pos_after(text, "ready: ")))
        << v;
  }
}

TEST(YamlTyping, BooleanLookingNamesAreNotStrings) {
  // The "Norway problem": an unquoted `no` is a boolean, not the name "no".
  std::string text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: no\n";
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  // Reported while reading the name, before the object has a label beyond its kind.
  EXPECT_TRUE(has_diag(l, DiagCode::WrongType, "Node", "metadata.name", pos_after(text, "name: ")));
  EXPECT_TRUE(has_diag(l, DiagCode::MissingField, "Node <unnamed>", "metadata.name", pos_of(text, "name: ")));
  auto quoted = load_yaml("apiVersion: v1\nkind: Node\nmetadata:\n  name: \"no\"\n");
  ASSERT_TRUE(quoted.ok) << quoted.rendered();
  EXPECT_EQ(quoted.snap.nodes[0].meta.name, "no");
  auto number = load_yaml("apiVersion: v1\nkind: Node\nmetadata:\n  name: 123\n");
  EXPECT_TRUE(number.find(DiagCode::WrongType, "metadata.name")) << number.rendered();
}

TEST(YamlTyping, DottedNumbersAndAddresses) {
  // "6.1" is a float; a kernel version must be quoted. Dotted quads are strings.
  std::string text = "apiVersion: kpc.dev/v1alpha1\nkind: NodeEnvironment\nkernel: {version: 6.1}\n";
  auto l = load_yaml(text);
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(has_diag(l, DiagCode::WrongType, "NodeEnvironment", "kernel.version", pos_of(text, "6.1")));
  auto ok = load_yaml("apiVersion: kpc.dev/v1alpha1\nkind: NodeEnvironment\nkernel: {version: 6.1.0}\n");
  ASSERT_TRUE(ok.ok) << ok.rendered();
  EXPECT_EQ(ok.snap.env.kernel_version, "6.1.0");
  auto label = load_yaml("apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n  labels: {version: 1.0}\n");
  EXPECT_TRUE(label.find(DiagCode::WrongType, "metadata.labels[version]")) << label.rendered();
}

TEST(YamlTyping, NullLabelValueIsEmpty) {
  auto l = load_yaml("apiVersion: v1\nkind: Node\nmetadata:\n  name: node-1\n  labels: {a: , b: ~}\n");
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.nodes[0].meta.labels, (std::map<std::string, std::string>{{"a", ""}, {"b", ""}}));
}

TEST(JsonTyping, StringsNumbersAndBooleansAreDistinct) {
  auto svc = [](const std::string& port) {
    return R"({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": )" +
           port + "}]}}";
  };
  auto ok = load_json(svc("80"));
  ASSERT_TRUE(ok.ok) << ok.rendered();
  EXPECT_EQ(ok.snap.services[0].ports[0].port, 80);
  for (const char* v : {"\"80\"", "80.0", "8e1", "true", "[80]", "{}"}) {
    std::string text = svc(v);
    auto l = load_json(text);
    EXPECT_FALSE(l.ok) << v;
    EXPECT_TRUE(has_diag(l, DiagCode::WrongType, "Service default/web", "spec.ports[0].port", pos_after(text, "\"port\": ")))
        << v;
  }
  auto null_port = load_json(svc("null"));
  EXPECT_TRUE(null_port.find(DiagCode::MissingField, "spec.ports[0].port")) << null_port.rendered();
  auto neg = load_json(svc("-1"));
  EXPECT_TRUE(neg.find(DiagCode::PortOutOfRange, "spec.ports[0].port")) << neg.rendered();
  auto huge = load_json(svc("123456789012345678901234567890"));
  EXPECT_TRUE(huge.find(DiagCode::PortOutOfRange, "spec.ports[0].port")) << huge.rendered();
}

}  // namespace
}  // namespace kpc
