// Nothing in a snapshot is dropped silently (issue 13, section 3): what kube-proxy reads past —
// a Service without a clusterIP, FQDN / unlabelled / orphan slices, slice ports that match no
// Service port, Service ports no slice port has — is a warning naming the object (W0004-W0007),
// and `kpc validate` counts the endpoints the compiler attaches to Service ports.
#include <gtest/gtest.h>

#include "tests/support/test_util.h"
#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {
using loadtest::has_diag;
using loadtest::load_yaml;
using loadtest::pos_after;
using loadtest::pos_of;

const char* kSnapshot = R"(apiVersion: v1
kind: Service
metadata: {name: web, namespace: t}
spec:
  clusterIP: 10.96.0.1
  ports:
  - {name: http, port: 80, protocol: TCP}
  - {name: metrics, port: 9090, protocol: TCP}
---
apiVersion: v1
kind: Service
metadata: {name: no-ip, namespace: t}
spec:
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: headless, namespace: t}
spec: {clusterIP: None, ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: t, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.1.0.1]}, {addresses: [10.1.0.2]}]
ports:
- {name: http, port: 8080, protocol: TCP}
- {name: htpt, port: 8080, protocol: TCP}
- {port: 8080, protocol: TCP}
- {name: extra, port: 8081}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-fqdn, namespace: t, labels: {kubernetes.io/service-name: web}}
addressType: FQDN
endpoints: [{addresses: [db.example.com]}]
ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: nolabel, namespace: t}
addressType: IPv4
endpoints: [{addresses: [10.1.1.1]}]
ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: orphan-1, namespace: t, labels: {kubernetes.io/service-name: gone}}
addressType: IPv4
endpoints: [{addresses: [10.1.2.1]}]
ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: headless-1, namespace: t, labels: {kubernetes.io/service-name: headless}}
addressType: IPv4
endpoints: [{addresses: [10.1.3.1]}]
ports: [{name: "", port: 80, protocol: TCP}]
)";

const Diagnostic* find(const loadtest::Loaded& l, DiagCode code, std::string_view object, std::string_view path) {
  for (const auto& d : l.diags.all())
    if (d.code == code && d.object == object && d.path == path) return &d;
  return nullptr;
}

TEST(LoaderIgnoredWarnings, EachIgnoredObjectIsAWarningNamingIt) {
  auto l = load_yaml(kSnapshot);
  ASSERT_TRUE(l.ok) << l.rendered();  // warnings only
  EXPECT_TRUE(has_diag(l, DiagCode::WarnNoClusterIP, "Service t/no-ip", "spec.clusterIP", pos_of(kSnapshot, "apiVersion", 1)));
  EXPECT_TRUE(has_diag(l, DiagCode::WarnSliceIgnored, "EndpointSlice t/web-fqdn", "addressType",
                       pos_after(kSnapshot, "addressType: ", 1)));
  const Diagnostic* nolabel = find(l, DiagCode::WarnSliceIgnored, "EndpointSlice t/nolabel", "metadata.labels");
  ASSERT_NE(nolabel, nullptr) << l.rendered();
  EXPECT_NE(nolabel->message.find("no kubernetes.io/service-name label"), std::string::npos);
  const Diagnostic* orphan = find(l, DiagCode::WarnSliceIgnored, "EndpointSlice t/orphan-1", "metadata.labels");
  ASSERT_NE(orphan, nullptr) << l.rendered();
  EXPECT_NE(orphan->message.find("names Service t/gone, which the snapshot does not have"), std::string::npos);

  // web-1's ports: http matches; htpt is no port of web; one has no name, one no protocol.
  EXPECT_EQ(find(l, DiagCode::WarnSlicePortUnmatched, "EndpointSlice t/web-1", "ports[0]"), nullptr) << l.rendered();
  const Diagnostic* typo = find(l, DiagCode::WarnSlicePortUnmatched, "EndpointSlice t/web-1", "ports[1]");
  ASSERT_NE(typo, nullptr) << l.rendered();
  EXPECT_EQ(typo->message, "port \"htpt\"/TCP is no port of Service t/web: its endpoints are not used");
  EXPECT_TRUE(has_diag(l, DiagCode::WarnSlicePortUnmatched, "EndpointSlice t/web-1", "ports[2]",
                       pos_of(kSnapshot, "{port: 8080, protocol: TCP}")));
  const Diagnostic* no_proto = find(l, DiagCode::WarnSlicePortUnmatched, "EndpointSlice t/web-1", "ports[3]");
  ASSERT_NE(no_proto, nullptr) << l.rendered();
  EXPECT_NE(no_proto->message.find("no `protocol`"), std::string::npos);

  // web's metrics port: no slice port has it.
  const Diagnostic* metrics = find(l, DiagCode::WarnServicePortUnmatched, "Service t/web", "spec.ports[1]");
  ASSERT_NE(metrics, nullptr) << l.rendered();
  EXPECT_NE(metrics->message.find("named \"metrics\" with protocol TCP"), std::string::npos);
  EXPECT_EQ(find(l, DiagCode::WarnServicePortUnmatched, "Service t/web", "spec.ports[0]"), nullptr);

  // A headless Service and its slices are not kube-proxy's: no warning about them.
  for (const auto& d : l.diags.all()) {
    EXPECT_EQ(d.object.find("headless"), std::string::npos) << render(d, l.sm);
    EXPECT_TRUE(is_warning(d.code)) << render(d, l.sm);
  }
}

TEST(LoaderIgnoredWarnings, ValidateCountsTheEndpointsServicePortsGet) {
  std::string dir = test::temp_dir("ignored");
  test::write_file(dir + "/snap.yaml", kSnapshot);
  auto r = test::run({test::bin_path("kpc"), "validate", dir + "/snap.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 6 endpoints in slices; only web:http's two (from web-1) are used.
  EXPECT_EQ(r.out,
            "valid: 3 Services, 5 EndpointSlices (2 endpoints of Service ports: 2 IPv4, 0 IPv6), 0 Nodes\n");
  EXPECT_NE(r.err.find("warning[W0007]: Service t/web: spec.ports[1]: "), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kpc
