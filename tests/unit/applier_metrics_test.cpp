// kpc-applier's metrics and health (issue 15 §3): kube-proxy's metric names, labels and
// buckets in the Prometheus text format; /healthz and /livez with kube-proxy's semantics
// (unhealthy once an update has been queued for longer than 2 × syncPeriod without a
// successful sync; /healthz also needs the Node); the tiny HTTP server, scraped over a socket.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "applier/node/http_server.h"
#include "applier/node/metrics.h"

namespace kpc::test {
namespace {

using applier::ApplierMetrics;
using applier::FamilyReport;
using applier::SyncReport;

FamilyReport report(IPFamily f, const char* kind, bool ok, double ms) {
  FamilyReport r;
  r.family = f;
  r.kind = kind;
  r.ok = ok;
  r.compile_ms = ms / 2, r.apply_ms = ms / 2;
  return r;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(ApplierMetrics, KubeProxysNamesLabelsAndBuckets) {
  ApplierMetrics m(BackendKind::IPTables, 60'000, {IPFamily::V4, IPFamily::V6});
  SyncReport r;
  FamilyReport full = report(IPFamily::V4, "full", true, 3.0);  // 3 ms: the 0.004 bucket
  full.rules_written = {{"nat", 12}, {"filter", 3}};
  full.rules_total = {{"nat", 12}, {"filter", 3}};
  r.families = {full, report(IPFamily::V6, "skipped", true, 0)};
  m.synced(r, 1'700'000'000'000);
  FamilyReport partial = report(IPFamily::V4, "partial", false, 0.5);
  r.families = {partial};
  m.synced(r, 1'700'000'001'000);
  FamilyReport fallback = report(IPFamily::V4, "full", true, 20);
  fallback.fallback = true, fallback.verify_ms = 2;
  r.families = {fallback};
  m.synced(r, 1'700'000'002'000);
  m.network_programmed(IPFamily::V4, 0.3);
  std::string t = m.render();
  EXPECT_TRUE(has_line(t, "# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram")) << t;
  EXPECT_TRUE(has_line(t, "# HELP kubeproxy_sync_proxy_rules_duration_seconds [ALPHA] SyncProxyRules latency in seconds"));
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family=\"IPv4\",le=\"0.001\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family=\"IPv4\",le=\"0.004\"} 2")) << t;
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family=\"IPv4\",le=\"16.384\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family=\"IPv4\"} 3"));
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family=\"IPv6\"} 0"));
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family=\"IPv4\"} 2"));
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family=\"IPv4\"} 0"));
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family=\"IPv4\"} 1"));
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total{ip_family=\"IPv4\"} 1"));
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_iptables_total{ip_family=\"IPv4\",table=\"nat\"} 12")) << t;
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_iptables_last{ip_family=\"IPv4\",table=\"filter\"} 0")) << t;
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1700000002"));
  EXPECT_TRUE(has_line(t, "kubeproxy_network_programming_duration_seconds_bucket{ip_family=\"IPv4\",le=\"0.25\"} 0"));
  EXPECT_TRUE(has_line(t, "kubeproxy_network_programming_duration_seconds_bucket{ip_family=\"IPv4\",le=\"0.5\"} 1"));
  EXPECT_TRUE(has_line(t, "kubeproxy_network_programming_duration_seconds_bucket{ip_family=\"IPv4\",le=\"300\"} 1"));
  EXPECT_TRUE(has_line(t, "kpc_partial_verify_failures_total{ip_family=\"IPv4\"} 1"));
  EXPECT_TRUE(has_line(t, "kpc_partial_verify_duration_seconds_count{ip_family=\"IPv4\"} 1"));
  EXPECT_TRUE(has_line(t, "kpc_drift_repairs_total 0"));
  EXPECT_TRUE(has_line(t, "kpc_nft_scoped_compare_mismatches_total{ip_family=\"IPv4\"} 0"));
  // Exact bucket sets.
  EXPECT_EQ(applier::sync_duration_buckets().size(), 15u);
  EXPECT_DOUBLE_EQ(applier::sync_duration_buckets().back(), 16.384);
  auto np = applier::network_programming_buckets();
  ASSERT_EQ(np.size(), 2u + 59 + 12 + 7);
  EXPECT_DOUBLE_EQ(np[2], 1);
  EXPECT_DOUBLE_EQ(np[61], 60);
  EXPECT_DOUBLE_EQ(np[73], 120);
  EXPECT_DOUBLE_EQ(np.back(), 300);
  // nftables mode: no iptables metrics.
  ApplierMetrics n(BackendKind::NFTables, 60'000, {IPFamily::V4});
  EXPECT_EQ(n.render().find("iptables"), std::string::npos);
  EXPECT_NE(n.render().find("kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family=\"IPv4\"} 0"), std::string::npos);
}

TEST(ApplierMetrics, HealthzAndLivezFollowKubeProxy) {
  ApplierMetrics m(BackendKind::IPTables, 60'000, {IPFamily::V4});  // syncPeriod 30 s
  std::string body;
  const int64_t t0 = 1'700'000'000'000;
  EXPECT_EQ(m.healthz(false, t0, &body), 200) << "healthy while starting up";
  m.queued(t0);
  EXPECT_EQ(m.healthz(false, t0 + 59'000, &body), 200) << "queued, not late yet";
  EXPECT_EQ(m.healthz(true, t0 + 61'000, &body), 503) << "queued longer than 2 x syncPeriod";
  EXPECT_NE(body.find("\"healthy\":false"), std::string::npos) << body;
  SyncReport failed;
  failed.families = {report(IPFamily::V4, "full", false, 1)};
  m.synced(failed, t0 + 62'000);
  EXPECT_EQ(m.healthz(false, t0 + 62'000, &body), 503) << "a failed sync is not an update";
  SyncReport ok;
  ok.families = {report(IPFamily::V4, "full", true, 1)};
  m.synced(ok, t0 + 63'000);
  EXPECT_EQ(m.healthz(false, t0 + 63'000, &body), 200);
  EXPECT_NE(body.find("\"lastUpdated\":\"2023-11-14T22:14:23.000Z\""), std::string::npos) << body;
  m.set_node_eligible(false);
  EXPECT_EQ(m.healthz(false, t0 + 64'000, &body), 503) << "/healthz needs the node";
  EXPECT_NE(body.find("\"nodeEligible\":false"), std::string::npos) << body;
  EXPECT_EQ(m.healthz(true, t0 + 64'000, &body), 200) << "/livez does not";
  std::string t = m.render();
  EXPECT_TRUE(has_line(t, "kubeproxy_proxy_healthz_total{code=\"200\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "kubeproxy_proxy_healthz_total{code=\"503\"} 2")) << t;
  EXPECT_TRUE(has_line(t, "kubeproxy_proxy_livez_total{code=\"503\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family=\"IPv4\"} 1700000000")) << t;
}

TEST(ApplierMetrics, Rfc3339) {
  int64_t ms = 0;
  ASSERT_TRUE(applier::parse_rfc3339_ms("2023-11-14T22:13:20Z", &ms));
  EXPECT_EQ(ms, 1'700'000'000'000);
  ASSERT_TRUE(applier::parse_rfc3339_ms("2023-11-14T22:13:20.25Z", &ms));
  EXPECT_EQ(ms, 1'700'000'000'250);
  ASSERT_TRUE(applier::parse_rfc3339_ms("2023-11-14T23:13:20+01:00", &ms));
  EXPECT_EQ(ms, 1'700'000'000'000);
  EXPECT_FALSE(applier::parse_rfc3339_ms("2023-11-14 22:13:20Z", &ms));
  EXPECT_FALSE(applier::parse_rfc3339_ms("2023-11-14T22:13:20", &ms));
  EXPECT_FALSE(applier::parse_rfc3339_ms("yesterday", &ms));
}

// One request over a plain socket; the whole response.
std::string http_get(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return close(fd), "";
  (void)!write(fd, request.data(), request.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST(ApplierMetrics, TheHttpServerServesMetricsAndHealth) {
  ApplierMetrics m(BackendKind::IPTables, 60'000, {IPFamily::V4});
  applier::TinyHttpServer s;
  std::string err;
  ASSERT_TRUE(s.start("127.0.0.1:0", [&](const std::string& path) {
    if (path == "/metrics") return applier::HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", m.render()};
    if (path == "/livez") {
      applier::HttpResponse r;
      r.status = m.healthz(true, 1'700'000'000'000, &r.body);
      return r;
    }
    return applier::HttpResponse{};
  }, &err)) << err;
  ASSERT_GT(s.port(), 0);
  std::string r = http_get(s.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(r.find("kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family=\"IPv4\"} 0"), std::string::npos) << r;
  EXPECT_EQ(http_get(s.port(), "GET /livez?verbose HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(http_get(s.port(), "GET /nope HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(http_get(s.port(), "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(http_get(s.port(), "garbage without an end"), "") << "an unfinished request is dropped after 2 s";
  applier::TinyHttpServer taken;
  EXPECT_FALSE(taken.start("127.0.0.1:" + std::to_string(s.port()), [](const std::string&) { return applier::HttpResponse{}; }, &err));
  EXPECT_NE(err.find("in use"), std::string::npos) << err;
  EXPECT_FALSE(taken.start("localhost:80", [](const std::string&) { return applier::HttpResponse{}; }, &err));
}

}  // namespace
}  // namespace kpc::test
