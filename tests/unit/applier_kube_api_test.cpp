// kpc-applier's Kubernetes API source (issue 15 §1): the reflector bookkeeping alone
// (ResourceState), kubeconfig and in-cluster credentials, the backoff, and the whole client
// against tests/support/kube_api_server.py — a local HTTPS server with the API server's
// list/watch semantics (resourceVersions, bookmarks, 410 Gone, dropped connections, bearer
// tokens, client certificates). No real API server can be installed here; this is what the
// client is tested against (docs/applier.md).
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "applier/node/kube_api_source.h"
#include "applier/node/kube_credentials.h"
#include "applier/node/kube_resource.h"
#include "tests/support/kube_api_server.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

using applier::KubeApiOptions;
using applier::KubeApiSource;
using applier::ResourceState;
using applier::WatchEvent;

std::string svc_json(const std::string& name, const std::string& rv, const std::string& ip = "10.96.0.10",
                     bool with_kind = true) {
  std::string k = with_kind ? R"("apiVersion":"v1","kind":"Service",)" : "";
  return "{" + k + R"("metadata":{"name":")" + name + R"(","namespace":"default","resourceVersion":")" + rv +
         R"("},"spec":{"clusterIP":")" + ip + R"(","ports":[{"port":80,"protocol":"TCP"}]}})";
}
std::string list_json(const std::vector<std::string>& items, const std::string& rv) {
  std::string s = R"({"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":")" + rv + R"("},"items":[)";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? "," : "") + items[i];
  return s + "]}";
}
std::vector<WatchEvent> relist(ResourceState& st, const std::string& body, std::vector<std::string>* errors = nullptr) {
  std::vector<std::string> e;
  std::string cont, err;
  st.begin_list();
  EXPECT_TRUE(st.list_page(body, "GET /api/v1/services", &cont, errors ? errors : &e, &err)) << err;
  return st.end_list();
}
std::string describe(const std::vector<WatchEvent>& ev) {
  std::string s;
  for (const auto& e : ev) s += std::string(applier::watch_event_type_name(e.type)) + " " + e.ns + "/" + e.name + ";";
  return s;
}

TEST(KubeResourceState, ListGivesEventsAndARelistInfersDeletionsAndSkipsUnchanged) {
  ResourceState st(WatchEvent::Kind::Service);
  auto ev = relist(st, list_json({svc_json("a", "5", "10.96.0.10", false), svc_json("b", "6", "10.96.0.11", false)}, "7"));
  EXPECT_EQ(describe(ev), "ADDED default/a;ADDED default/b;");
  ASSERT_TRUE(ev[0].service.has_value());
  EXPECT_EQ(st.resource_version(), "7");
  // After a 410: b changed, a is gone, c is new; nothing for what did not change.
  ev = relist(st, list_json({svc_json("b", "9", "10.96.0.12"), svc_json("c", "10", "10.96.0.13")}, "11"));
  EXPECT_EQ(describe(ev), "MODIFIED default/b;ADDED default/c;DELETED default/a;");
  ev = relist(st, list_json({svc_json("b", "9", "10.96.0.12"), svc_json("c", "10", "10.96.0.13")}, "12"));
  EXPECT_EQ(describe(ev), "");
  EXPECT_EQ(st.resource_version(), "12");
  EXPECT_EQ(st.held(), 2u);
}

TEST(KubeResourceState, WatchLinesBookmarksReplaysAndGone) {
  ResourceState st(WatchEvent::Kind::Service);
  relist(st, list_json({svc_json("a", "5")}, "5"));
  std::vector<WatchEvent> ev;
  std::string err;
  using R = ResourceState::LineResult;
  EXPECT_EQ(st.watch_line(R"({"type":"ADDED","object":)" + svc_json("b", "6") + "}", "w", &ev, &err), R::Ok) << err;
  EXPECT_EQ(st.watch_line(R"({"type":"ADDED","object":)" + svc_json("b", "6") + "}", "w", &ev, &err), R::Ok);  // replay
  EXPECT_EQ(st.watch_line(R"({"type":"MODIFIED","object":)" + svc_json("a", "7", "10.96.0.99") + "}", "w", &ev, &err), R::Ok);
  EXPECT_EQ(st.watch_line(R"({"type":"DELETED","object":)" + svc_json("b", "8") + "}", "w", &ev, &err), R::Ok);
  EXPECT_EQ(st.watch_line(R"({"type":"DELETED","object":)" + svc_json("b", "8") + "}", "w", &ev, &err), R::Ok);  // replay
  EXPECT_EQ(describe(ev), "ADDED default/b;MODIFIED default/a;DELETED default/b;");
  EXPECT_EQ(st.replays_dropped(), 2u);
  EXPECT_EQ(st.resource_version(), "8");
  ev.clear();
  EXPECT_EQ(st.watch_line(R"({"type":"BOOKMARK","object":{"kind":"Service","apiVersion":"v1","metadata":{"resourceVersion":"42"}}})",
                          "w", &ev, &err),
            R::Ok);
  EXPECT_TRUE(ev.empty());
  EXPECT_EQ(st.resource_version(), "42");
  EXPECT_EQ(st.bookmarks(), 1u);
  EXPECT_EQ(st.watch_line(R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}})",
                          "w", &ev, &err),
            R::Gone);
  EXPECT_NE(err.find("410"), std::string::npos) << err;
  EXPECT_EQ(st.watch_line(R"({"type":"ERROR","object":{"kind":"Status","code":500,"message":"boom"}})", "w", &ev, &err),
            R::Error);
  EXPECT_EQ(st.watch_line("not json", "w", &ev, &err), R::Error);
  EXPECT_EQ(st.watch_line(R"({"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d"}}})",
                          "w", &ev, &err),
            R::Error);
  EXPECT_TRUE(ev.empty());
}

TEST(KubeResourceState, AnInvalidObjectIsSkippedWithALocatedErrorAndTheHeldVersionStays) {
  ResourceState st(WatchEvent::Kind::Service);
  std::vector<std::string> errors;
  auto ev = relist(st, list_json({svc_json("a", "5"), svc_json("bad", "6", "not-an-ip")}, "6"), &errors);
  EXPECT_EQ(describe(ev), "ADDED default/a;");
  ASSERT_EQ(errors.size(), 1u);
  // The model's decoder located the field in the response.
  EXPECT_NE(errors[0].find("GET /api/v1/services:1:"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("clusterIP"), std::string::npos) << errors[0];
  std::vector<WatchEvent> w;
  std::string err;
  EXPECT_EQ(st.watch_line(R"({"type":"MODIFIED","object":)" + svc_json("a", "7", "300.1.1.1") + "}", "watch /api/v1/services", &w, &err),
            ResourceState::LineResult::Error);
  EXPECT_NE(err.find("watch /api/v1/services:1:"), std::string::npos) << err;
  EXPECT_TRUE(w.empty());
  // A relist that still has the invalid version of a does not delete a.
  errors.clear();
  ev = relist(st, list_json({svc_json("a", "7", "300.1.1.1")}, "8"), &errors);
  EXPECT_EQ(describe(ev), "");
  EXPECT_EQ(errors.size(), 1u);
}

TEST(KubeCredentials, KubeconfigCurrentContextInlineDataAndRelativeFiles) {
  std::string dir = temp_dir("kubeconfig");
  write_file(dir + "/ca.pem", "CA PEM\n");
  write_file(dir + "/token", "  tok-from-file \n");
  write_file(dir + "/config", R"(apiVersion: v1
kind: Config
current-context: b
contexts:
- {name: a, context: {cluster: ca, user: ua}}
- {name: b, context: {cluster: cb, user: ub}}
clusters:
- {name: ca, cluster: {server: "https://a.example:6443"}}
- {name: cb, cluster: {server: "https://10.0.0.1:6443/", certificate-authority: ca.pem}}
users:
- {name: ua, user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}}
- {name: ub, user: {tokenFile: token}}
)");
  applier::KubeCredentials c;
  std::string err;
  ASSERT_TRUE(applier::load_kubeconfig(dir + "/config", "", &c, &err)) << err;
  EXPECT_EQ(c.server, "https://10.0.0.1:6443");
  EXPECT_EQ(c.ca_pem, "CA PEM\n");
  std::string tok;
  ASSERT_TRUE(c.current_token(&tok, &err));
  EXPECT_EQ(tok, "tok-from-file");
  ASSERT_TRUE(applier::load_kubeconfig(dir + "/config", "a", &c, &err)) << err;
  EXPECT_EQ(c.client_cert_pem, "CERT");
  EXPECT_EQ(c.client_key_pem, "KEY");
  EXPECT_FALSE(applier::load_kubeconfig(dir + "/config", "zz", &c, &err));
  EXPECT_NE(err.find("no context \"zz\""), std::string::npos) << err;
  write_file(dir + "/exec", "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                            "clusters: [{name: c, cluster: {server: 'https://s'}}]\n"
                            "users: [{name: u, user: {exec: {command: aws}}}]\n");
  EXPECT_FALSE(applier::load_kubeconfig(dir + "/exec", "", &c, &err));
  EXPECT_NE(err.find("user u: exec: apiVersion"), std::string::npos) << err;  // tests/unit/applier_kube_exec_test.cpp
  write_file(dir + "/bad64", "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
                             "clusters: [{name: c, cluster: {server: 'https://s', certificate-authority-data: '!!'}}]\n");
  EXPECT_FALSE(applier::load_kubeconfig(dir + "/bad64", "", &c, &err));
  EXPECT_NE(err.find("certificate-authority-data: not base64"), std::string::npos) << err;
  EXPECT_FALSE(applier::load_kubeconfig(dir + "/missing", "", &c, &err));
}

TEST(KubeCredentials, InClusterFromTheEnvironmentAndTheServiceAccountDirectory) {
  std::string dir = temp_dir("sa");
  write_file(dir + "/ca.crt", "CA\n");
  write_file(dir + "/token", "t1\n");
  std::map<std::string, std::string> env{{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}};
  auto get = [&](const char* k) -> const char* { return env.count(k) ? env[k].c_str() : nullptr; };
  applier::KubeCredentials c;
  std::string err, tok;
  ASSERT_TRUE(applier::load_in_cluster(dir, &c, &err, get)) << err;
  EXPECT_EQ(c.server, "https://[fd00::1]:443");
  EXPECT_EQ(c.ca_pem, "CA\n");
  ASSERT_TRUE(c.current_token(&tok, &err));
  EXPECT_EQ(tok, "t1");
  write_file(dir + "/token", "t2\n");  // rotated: the next request sends the new token
  ASSERT_TRUE(c.current_token(&tok, &err));
  EXPECT_EQ(tok, "t2");
  env.clear();
  EXPECT_FALSE(applier::load_in_cluster(dir, &c, &err, get));
  EXPECT_NE(err.find("KUBERNETES_SERVICE_HOST"), std::string::npos);
}

TEST(KubeBackoff, CappedExponentialWithJitter) {
  applier::Backoff b(100, 1000, 1.0, 7);
  int64_t prev_base = 100;
  for (int i = 0; i < 10; ++i) {
    int64_t w = b.next_ms();
    EXPECT_GE(w, std::min<int64_t>(prev_base, 1000));
    EXPECT_LE(w, 1000);
    prev_base = std::min<int64_t>(prev_base * 2, 1000);
  }
  b.reset();
  EXPECT_LE(b.next_ms(), 200);
}

TEST(KubeApiCli, SourceAndCredentialErrorsAreExitCode2WithTheReason) {
  std::string dir = temp_dir("kube-cli");
  auto r = run({bin_path("kpc-applier"), "--kubeconfig", dir + "/missing"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("kubeconfig " + dir + "/missing: cannot be read"), std::string::npos) << r.err;
  r = run({bin_path("kpc-applier"), "--kubeconfig", dir + "/k", "--watch", dir});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("two sources"), std::string::npos) << r.err;
  write_file(dir + "/exec", "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                            "clusters: [{name: c, cluster: {server: 'https://s'}}]\n"
                            "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n");
  r = run({bin_path("kpc-applier"), "--kubeconfig", dir + "/exec"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("plugins are not supported"), std::string::npos) << r.err;
  // No source at all, outside a pod.
  r = run({"env", "-u", "KUBERNETES_SERVICE_HOST", bin_path("kpc-applier")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("a source is required"), std::string::npos) << r.err;
}

// ------------------------------------------------------------------ against the test server

#define NEED_SERVER()                                                                    \
  if (!can_run_kube_api_server()) GTEST_SKIP() << "needs python3 (yaml, ssl) and openssl"; \
  ASSERT_TRUE(test_pki().ok) << test_pki().error

// What a consumer of the source holds: object key -> present, from the drained events.
struct Held {
  std::map<std::string, int> count;  ///< events per "Kind ns/name"
  std::set<std::string> present;
  size_t events = 0;
  void apply(const std::vector<WatchEvent>& ev) {
    for (const auto& e : ev) {
      std::string k = std::string(applier::watch_event_kind_name(e.kind)) + " " + e.ns + "/" + e.name;
      ++count[k];
      ++events;
      if (e.type == WatchEvent::Type::Deleted) present.erase(k);
      else present.insert(k);
    }
  }
};

struct Harness {
  ~Harness() {
    if (source) source->stop();  // its threads log into members destroyed before it
  }
  KubeApiServer server;
  std::unique_ptr<KubeApiSource> source;
  Held held;
  std::mutex log_mu;
  std::vector<std::string> log;

  bool start(const KubeApiServerOptions& so, KubeconfigAuth auth, const std::string& token,
             KubeApiOptions ko = {}) {
    if (!server.start(so)) return ADD_FAILURE() << server.error(), false;
    std::string kc = write_kubeconfig(temp_dir("kc"), server.url(), auth, token);
    applier::KubeCredentials c;
    std::string err;
    if (!applier::load_kubeconfig(kc, "", &c, &err)) return ADD_FAILURE() << err, false;
    if (ko.node_name.empty()) ko.node_name = "node-a";
    ko.backoff_initial_ms = 50;
    ko.backoff_max_ms = 400;
    ko.seed = 1;
    source = std::make_unique<KubeApiSource>(c, ko, [this](const std::string& l) {
      std::lock_guard<std::mutex> g(log_mu);
      log.push_back(l);
    });
    source->start();
    return true;
  }
  /// Drains events until pred() or the timeout.
  bool until(const std::function<bool()>& pred, int timeout_ms = 15'000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      held.apply(source->drain());
      if (pred()) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{source->fd(), POLLIN, 0};
      poll(&p, 1, 50);
    }
  }
  /// The server's objects as Held keys.
  std::set<std::string> server_keys() {
    std::set<std::string> out;
    nlohmann::json reply = server.command({{"op", "keys"}});  // not a temporary: the loop reads into it
    for (const auto& k : reply["keys"])
      out.insert(k[0].get<std::string>() + " " + k[1].get<std::string>() + "/" + k[2].get<std::string>());
    return out;
  }
  std::string logs() {
    std::lock_guard<std::mutex> g(log_mu);
    std::string s;
    for (const auto& l : log) s += l + "\n";
    return s;
  }
};

// The server's request log (a copy: ranging over a temporary's member would dangle).
nlohmann::json request_log(Harness& h) { return h.server.command({{"op", "log"}})["log"]; }

KubeApiServerOptions example_server(const std::string& token = "sekret") {
  KubeApiServerOptions o;
  o.token = token;
  for (auto f : {"services.yaml", "endpointslices.json", "nodes.yaml"})
    o.objects.push_back(source_path(std::string("fixtures/example/") + f));
  return o;
}

// What the client should hold of the server: its Services and EndpointSlices, and only this Node.
std::set<std::string> expected_for(const std::set<std::string>& server, const std::string& node) {
  std::set<std::string> out;
  for (const auto& k : server)
    if (k.rfind("Node ", 0) != 0 || k == "Node /" + node) out.insert(k);
  return out;
}

nlohmann::json service_object(const std::string& name, const std::string& ip) {
  return nlohmann::json::parse(svc_json(name, "0", ip));
}

TEST(ApplierKubeApi, InitialListThenWatchEventsWithTheNodeSelected) {
  NEED_SERVER();
  Harness h;
  ASSERT_TRUE(h.start(example_server(), KubeconfigAuth::Token, "sekret"));
  auto want = expected_for(h.server_keys(), "node-a");
  ASSERT_GT(want.size(), 8u);
  ASSERT_TRUE(h.until([&] { return h.source->synced() && h.held.present == want; })) << h.logs();
  EXPECT_FALSE(h.held.present.count("Node /node-b"));
  // Watch events: add, modify, delete.
  ASSERT_TRUE(h.server.command({{"op", "put"}, {"object", service_object("new", "10.96.7.7")}})["ok"]);
  ASSERT_TRUE(h.until([&] { return h.held.present.count("Service default/new"); })) << h.logs();
  ASSERT_TRUE(h.server.command({{"op", "put"}, {"object", service_object("new", "10.96.7.8")}})["ok"]);
  ASSERT_TRUE(h.until([&] { return h.held.count["Service default/new"] == 2; })) << h.logs();
  ASSERT_TRUE(h.server.command({{"op", "delete"}, {"kind", "Service"}, {"namespace", "default"}, {"name", "new"}})["ok"]);
  ASSERT_TRUE(h.until([&] { return !h.held.present.count("Service default/new"); })) << h.logs();
  EXPECT_EQ(h.held.count["Service default/new"], 3);
  EXPECT_EQ(h.held.present, want);
  EXPECT_EQ(h.source->stats("services").lists, 1u);
  // The watches asked for bookmarks, from the list's resourceVersion; the Node's used the selector.
  bool node_watch = false, svc_watch = false;
  for (const auto& r : request_log(h)) {
    auto q = r["query"];
    if (!q.contains("watch")) continue;
    EXPECT_EQ(q.value("allowWatchBookmarks", ""), "true");
    if (r["path"] == "/api/v1/nodes") node_watch = q.value("fieldSelector", "") == "metadata.name=node-a";
    if (r["path"] == "/api/v1/services") svc_watch = !q.value("resourceVersion", "").empty();
  }
  EXPECT_TRUE(node_watch);
  EXPECT_TRUE(svc_watch);
}

TEST(ApplierKubeApi, AServiceOfAnotherProxyLeavesTheWatchAsKubeProxysLabelSelectorSays) {
  NEED_SERVER();
  Harness h;
  ASSERT_TRUE(h.start(example_server(), KubeconfigAuth::Token, "sekret"));
  ASSERT_TRUE(h.until([&] { return h.source->synced(); })) << h.logs();
  auto svc = service_object("other-proxy", "10.96.6.6");
  ASSERT_TRUE(h.server.command({{"op", "put"}, {"object", svc}})["ok"]);
  ASSERT_TRUE(h.until([&] { return h.held.present.count("Service default/other-proxy"); })) << h.logs();
  svc["metadata"]["labels"] = {{"service.kubernetes.io/service-proxy-name", "someone-else"}};
  ASSERT_TRUE(h.server.command({{"op", "put"}, {"object", svc}})["ok"]);
  ASSERT_TRUE(h.until([&] { return !h.held.present.count("Service default/other-proxy"); })) << h.logs();
  bool selector = false;
  for (const auto& r : request_log(h))
    if (r["path"] == "/api/v1/services")
      selector = r["query"].value("labelSelector", "") == applier::kKubeProxyLabelSelector;
  EXPECT_TRUE(selector);
}

TEST(ApplierKubeApi, ServiceCidrsAreWatchedWhenAskedAndAServerWithoutThemStillSyncs) {
  NEED_SERVER();
  KubeApiOptions ko;
  ko.service_cidrs = true;
  {
    Harness h;
    ASSERT_TRUE(h.start(example_server(), KubeconfigAuth::Token, "sekret", ko));
    ASSERT_TRUE(h.until([&] { return h.source->synced(); })) << h.logs();
    nlohmann::json cidr = nlohmann::json::parse(
        R"({"apiVersion":"networking.k8s.io/v1","kind":"ServiceCIDR","metadata":{"name":"kubernetes"},"spec":{"cidrs":["10.96.0.0/16"]}})");
    ASSERT_TRUE(h.server.command({{"op", "put"}, {"object", cidr}})["ok"]);
    ASSERT_TRUE(h.until([&] { return h.held.present.count("ServiceCIDR /kubernetes"); })) << h.logs();
    cidr["spec"]["cidrs"] = {"10.96.0.0/33"};  // invalid: skipped, the held one stays
    ASSERT_TRUE(h.server.command({{"op", "put"}, {"object", cidr}})["ok"]);
    ASSERT_TRUE(h.server.command({{"op", "delete"}, {"kind", "ServiceCIDR"}, {"name", "kubernetes"}})["ok"]);
    ASSERT_TRUE(h.until([&] { return !h.held.present.count("ServiceCIDR /kubernetes"); })) << h.logs();
    EXPECT_EQ(h.held.count["ServiceCIDR /kubernetes"], 2) << h.logs();
    EXPECT_EQ(h.source->stats("servicecidrs").invalid_objects, 1u);
  }
  Harness h;
  KubeApiServerOptions old = example_server();
  old.not_served = {"/apis/networking.k8s.io/v1/servicecidrs"};
  ASSERT_TRUE(h.start(old, KubeconfigAuth::Token, "sekret", ko));
  ASSERT_TRUE(h.until([&] { return h.source->synced(); })) << h.logs();
  EXPECT_NE(h.logs().find("not served by this API server"), std::string::npos) << h.logs();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  size_t requests = 0;
  for (const auto& r : request_log(h)) requests += r["path"] == "/apis/networking.k8s.io/v1/servicecidrs";
  EXPECT_EQ(requests, 1u) << "asked once, not retried";
}

TEST(ApplierKubeApi, ABookmarkAdvancesTheResourceVersion) {
  NEED_SERVER();
  Harness h;
  ASSERT_TRUE(h.start(example_server(), KubeconfigAuth::Token, "sekret"));
  ASSERT_TRUE(h.until([&] { return h.source->synced(); })) << h.logs();
  std::string before = h.source->stats("nodes").resource_version;
  // A Service change moves the revision; the Node watch sees no event, only the bookmark.
  std::string rv = h.server.command({{"op", "put"}, {"object", service_object("bm", "10.96.7.9")}})["resourceVersion"];
  ASSERT_TRUE(h.until([&] { return h.held.present.count("Service default/bm"); }));
  EXPECT_EQ(h.source->stats("nodes").resource_version, before);
  h.server.command({{"op", "bookmark"}});
  ASSERT_TRUE(h.until([&] { return h.source->stats("nodes").resource_version == rv; }, 5000))
      << h.source->stats("nodes").resource_version << " != " << rv;
  EXPECT_GE(h.source->stats("nodes").bookmarks, 1u);
}

void gone_relist_converges(bool http_410) {
  Harness h;
  KubeApiOptions ko;
  ko.list_page_size = 2;  // lists in pages (limit/continue)
  ASSERT_TRUE(h.start(example_server(), KubeconfigAuth::Token, "sekret", ko));
  ASSERT_TRUE(h.until([&] { return h.source->synced(); })) << h.logs();
  // While the client is cut off: two Services and a slice deleted, one added, history compacted.
  h.server.command({{"op", "refuse"}, {"value", true}});
  h.server.command({{"op", "drop"}});
  size_t deleted = 0;
  for (const auto& k : h.server_keys()) {
    if (deleted < 3 && (k.rfind("Service ", 0) == 0 || k.rfind("EndpointSlice ", 0) == 0)) {
      auto sp = k.find(' '), sl = k.find('/');
      h.server.command({{"op", "delete"}, {"kind", k.substr(0, sp)}, {"namespace", k.substr(sp + 1, sl - sp - 1)},
                        {"name", k.substr(sl + 1)}});
      ++deleted;
    }
  }
  h.server.command({{"op", "put"}, {"object", service_object("while-away", "10.96.8.8")}});
  h.server.command({{"op", "compact"}, {"http", http_410}});
  h.server.command({{"op", "refuse"}, {"value", false}});
  auto want = expected_for(h.server_keys(), "node-a");
  ASSERT_TRUE(h.until([&] { return h.held.present == want; })) << h.logs();
  EXPECT_GE(h.source->stats("services").relists_gone + h.source->stats("endpointslices").relists_gone, 1u) << h.logs();
  EXPECT_NE(h.logs().find("410 Gone"), std::string::npos);
  size_t continued = 0;
  for (const auto& r : request_log(h)) continued += r["query"].contains("continue");
  EXPECT_GE(continued, 4u);
}

TEST(ApplierKubeApi, GoneAsAnErrorEventRelistsAndConvergesWithDeletionsMadeWhileAway) {
  NEED_SERVER();
  gone_relist_converges(false);
}

TEST(ApplierKubeApi, GoneAsHttp410RelistsAndConverges) {
  NEED_SERVER();
  gone_relist_converges(true);
}

TEST(ApplierKubeApi, ADroppedConnectionResumesFromTheLastResourceVersionWithoutLossOrDuplicates) {
  NEED_SERVER();
  Harness h;
  ASSERT_TRUE(h.start(example_server(), KubeconfigAuth::Token, "sekret"));
  ASSERT_TRUE(h.until([&] { return h.source->synced(); })) << h.logs();
  ASSERT_TRUE(h.server.command({{"op", "put"}, {"object", service_object("one", "10.96.9.1")}})["ok"]);
  ASSERT_TRUE(h.until([&] { return h.held.present.count("Service default/one"); }));
  std::string rv = h.source->stats("services").resource_version;
  size_t events = h.held.events;
  for (int round = 0; round < 3; ++round) {
    h.server.command({{"op", "drop"}});
    std::string name = "after-drop-" + std::to_string(round);
    ASSERT_TRUE(h.server.command({{"op", "put"}, {"object", service_object(name, "10.96.9." + std::to_string(10 + round))}})["ok"]);
    ASSERT_TRUE(h.until([&] { return h.held.present.count("Service default/" + name); })) << h.logs();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  h.held.apply(h.source->drain());
  EXPECT_EQ(h.held.events, events + 3) << "an event lost or applied twice";
  for (const auto& [k, n] : h.held.count)
    if (k.find("after-drop") != std::string::npos) {
      EXPECT_EQ(n, 1) << k;
    }
  auto st = h.source->stats("services");
  EXPECT_EQ(st.lists, 1u) << "a dropped connection must not relist";
  EXPECT_GE(st.reconnects, 3u);
  // The first re-watch after the first drop resumed from the resourceVersion held before it.
  bool resumed = false;
  for (const auto& r : request_log(h))
    if (r["path"] == "/api/v1/services" && r["query"].value("resourceVersion", "") == rv) resumed = true;
  EXPECT_TRUE(resumed) << rv;
  EXPECT_EQ(h.held.present, expected_for(h.server_keys(), "node-a"));
}

TEST(ApplierKubeApi, AWatchTimeoutWatchesAgainWithoutRelisting) {
  NEED_SERVER();
  Harness h;
  KubeApiOptions ko;
  ko.watch_timeout_s = 1;
  ASSERT_TRUE(h.start(example_server(), KubeconfigAuth::Token, "sekret", ko));
  ASSERT_TRUE(h.until([&] { return h.source->synced(); })) << h.logs();
  ASSERT_TRUE(h.until([&] { return h.source->stats("services").watches >= 3; }, 8000)) << h.logs();
  EXPECT_EQ(h.source->stats("services").lists, 1u);
  EXPECT_EQ(h.source->stats("services").reconnects, 0u) << h.logs();
}

TEST(ApplierKubeApi, ABadTokenIsAClearErrorWithBackoffAndNothingIsDelivered) {
  NEED_SERVER();
  Harness h;
  ASSERT_TRUE(h.start(example_server("right"), KubeconfigAuth::Token, "wrong"));
  ASSERT_TRUE(h.until([&] { return h.source->stats("services").http_errors >= 3; }, 10'000)) << h.logs();
  EXPECT_FALSE(h.source->synced());
  EXPECT_EQ(h.held.events, 0u);
  auto st = h.source->stats("services");
  EXPECT_NE(st.last_error.find("HTTP 401"), std::string::npos) << st.last_error;
  EXPECT_GE(st.last_backoff_ms, 100) << "the backoff grows";
  EXPECT_LE(st.last_backoff_ms, 400) << "and is capped";
  std::string logs = h.logs();
  EXPECT_NE(logs.find("\"msg\":\"list failed\""), std::string::npos) << logs;
  EXPECT_NE(logs.find("Unauthorized"), std::string::npos) << logs;
  EXPECT_NE(logs.find("retry_in_ms"), std::string::npos) << logs;
}

TEST(ApplierKubeApi, ClientCertificatesFromFilesOrInlineDataAndNoneRefused) {
  NEED_SERVER();
  for (auto auth : {KubeconfigAuth::ClientCertFiles, KubeconfigAuth::ClientCertInline}) {
    Harness h;
    KubeApiServerOptions o = example_server("");
    o.require_client_cert = true;
    ASSERT_TRUE(h.start(o, auth, ""));
    ASSERT_TRUE(h.until([&] { return h.source->synced(); })) << h.logs() << h.server.stderr_text();
  }
  Harness h;
  KubeApiServerOptions o = example_server("");
  o.require_client_cert = true;
  ASSERT_TRUE(h.start(o, KubeconfigAuth::None, ""));
  ASSERT_TRUE(h.until([&] { return h.source->stats("services").last_backoff_ms > 0; }, 10'000)) << h.logs();
  EXPECT_FALSE(h.source->synced());
  EXPECT_NE(h.source->stats("services").last_error.find("connection:"), std::string::npos)
      << h.source->stats("services").last_error;
}

TEST(ApplierKubeApi, AnInvalidObjectIsLoggedAndSkippedAndTheWatchGoesOn) {
  NEED_SERVER();
  Harness h;
  ASSERT_TRUE(h.start(example_server(), KubeconfigAuth::Token, "sekret"));
  ASSERT_TRUE(h.until([&] { return h.source->synced(); })) << h.logs();
  h.server.command({{"op", "put"}, {"object", service_object("broken", "10.96.999.1")}});
  h.server.command({{"op", "put"}, {"object", service_object("fine", "10.96.9.99")}});
  ASSERT_TRUE(h.until([&] { return h.held.present.count("Service default/fine"); })) << h.logs();
  EXPECT_FALSE(h.held.present.count("Service default/broken"));
  std::string logs = h.logs();
  EXPECT_NE(logs.find("invalid watch event skipped"), std::string::npos) << logs;
  EXPECT_NE(logs.find("watch /api/v1/services:1:"), std::string::npos) << logs;
  EXPECT_EQ(h.source->stats("services").invalid_objects, 1u);
}

}  // namespace
}  // namespace kpc::test
