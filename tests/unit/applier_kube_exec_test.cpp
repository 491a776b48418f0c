// kubeconfig exec credential plugins for kpc-applier's API source (issue 15 §1): the
// ExecCredential answer, the kubeconfig fields, when the plugin runs (once while its
// credential is valid, again after expirationTimestamp or a 401), what it is given
// (args, env, KUBERNETES_EXEC_INFO with the cluster when provideClusterInfo), its failures
// (exit status, missing command with installHint, a hung plugin killed) — plugins are small
// shell scripts here — and a 401 from tests/support/kube_api_server.py retried once with a
// fresh credential.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/stat.h>

#include "applier/node/kube_credentials.h"
#include "applier/node/kube_exec_credential.h"
#include "applier/node/kube_http.h"
#include "tests/support/kube_api_server.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

using applier::ExecCredential;
using applier::ExecCredentialSource;
using applier::ExecPluginConfig;
using applier::parse_exec_credential;

constexpr const char* kV1 = "client.authentication.k8s.io/v1";

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string script(const std::string& dir, const std::string& name, const std::string& body) {
  std::string p = dir + "/" + name;
  write_file(p, "#!/bin/sh\n" + body);
  chmod(p.c_str(), 0755);
  return p;
}

// A plugin that counts its runs in DIR/runs and answers tok-<run>, valid until the time in
// DIR/expiry if that file exists.
std::string counting_plugin(const std::string& dir) {
  return script(dir, "plugin",
                "n=$(( $(cat " + dir + "/runs 2>/dev/null || echo 0) + 1 )); echo $n > " + dir + "/runs\n"
                "env > " + dir + "/env\necho \"$@\" > " + dir + "/args\n"
                "exp=''; [ -f " + dir + "/expiry ] && exp=\",\\\"expirationTimestamp\\\":\\\"$(cat " + dir + "/expiry)\\\"\"\n"
                "echo \"{\\\"apiVersion\\\":\\\"" + kV1 + "\\\",\\\"kind\\\":\\\"ExecCredential\\\","
                "\\\"status\\\":{\\\"token\\\":\\\"tok-$n\\\"$exp}}\"\n");
}

TEST(ExecCredential, AnswersAreCheckedAsClientGoChecksThem) {
  ExecCredential c;
  std::string err;
  auto doc = [](const std::string& status, const std::string& api = kV1) {
    return R"({"apiVersion":")" + api + R"(","kind":"ExecCredential","status":)" + status + "}";
  };
  ASSERT_TRUE(parse_exec_credential(doc(R"({"token":"abc","expirationTimestamp":"2026-11-27T18:00:00Z"})"), kV1, &c, &err)) << err;
  EXPECT_EQ(c.token, "abc");
  ASSERT_TRUE(c.expiry.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*c.expiry), 1795802400);  // date -d 2026-11-27T18:00:00Z +%s
  ASSERT_TRUE(parse_exec_credential(doc(R"({"token":"abc","expirationTimestamp":"2026-11-27T19:30:00.123+01:30"})"), kV1,
                                    &c, &err)) << err;
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*c.expiry), 1795802400);
  ASSERT_TRUE(parse_exec_credential(doc(R"({"clientCertificateData":"C","clientKeyData":"K"})"), kV1, &c, &err)) << err;
  EXPECT_EQ(c.client_cert_pem, "C");
  EXPECT_FALSE(c.expiry.has_value());

  struct Bad {
    std::string text, why;
  };
  for (const Bad& b : std::vector<Bad>{
           {"not json", "not a JSON object"},
           {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Status"})", "not an ExecCredential"},
           {doc(R"({"token":"a"})", "client.authentication.k8s.io/v1beta1"), "the kubeconfig asked for"},
           {doc("null"), "no status"},
           {doc("{}"), "neither a token nor a client certificate"},
           {doc(R"({"clientCertificateData":"C"})"), "without the other"},
           {doc(R"({"token":"a\r\nX-Injected: 1"})"), "line break"},
           {doc(R"({"token":"a","expirationTimestamp":"tomorrow"})"), "not RFC 3339"},
       }) {
    EXPECT_FALSE(parse_exec_credential(b.text, kV1, &c, &err)) << b.text;
    EXPECT_NE(err.find(b.why), std::string::npos) << b.text << " -> " << err;
  }
}

TEST(ExecCredential, KubeconfigExecSectionsAreReadOrRefusedWithTheReason) {
  std::string dir = temp_dir("kexec");
  write_file(dir + "/ca.pem", "CA PEM\n");
  auto kubeconfig = [&](const std::string& user) {
    write_file(dir + "/config", "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                                "clusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443', certificate-authority: ca.pem}}]\n"
                                "users: [{name: u, user: " + user + "}]\n");
    return dir + "/config";
  };
  applier::KubeCredentials c;
  std::string err;
  ASSERT_TRUE(applier::load_kubeconfig(
      kubeconfig("{exec: {apiVersion: " + std::string(kV1) +
                 ", command: ./bin/get-token, args: [--cluster, c1], env: [{name: REGION, value: eu-1}], "
                 "interactiveMode: Never, provideClusterInfo: true, installHint: 'apt install get-token'}}"),
      "", &c, &err)) << err;
  ASSERT_TRUE(c.exec);
  const ExecPluginConfig& p = c.exec->config();
  EXPECT_EQ(p.command, dir + "/./bin/get-token");  // a path: relative to the kubeconfig
  EXPECT_EQ(p.args, (std::vector<std::string>{"--cluster", "c1"}));
  ASSERT_EQ(p.env.size(), 1u);
  EXPECT_EQ(p.env[0].second, "eu-1");
  auto info = nlohmann::json::parse(applier::exec_info_json(p));
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"]["server"], "https://10.0.0.1:6443");
  EXPECT_EQ(info["spec"]["cluster"]["certificate-authority-data"], applier::encode_base64("CA PEM\n"));
  ASSERT_TRUE(applier::load_kubeconfig(
      kubeconfig("{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws}}"), "", &c, &err)) << err;
  EXPECT_EQ(c.exec->config().command, "aws");  // a bare name: looked up on PATH when run

  struct Bad {
    std::string user, why;
  };
  for (const Bad& b : std::vector<Bad>{
           {"{exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: a}}", "v1alpha1 was removed"},
           {"{exec: {command: a}}", "apiVersion"},
           {"{exec: {apiVersion: " + std::string(kV1) + ", command: a}}", "interactiveMode is required"},
           {"{exec: {apiVersion: " + std::string(kV1) + ", command: a, interactiveMode: Always}}", "needs a terminal"},
           {"{exec: {apiVersion: " + std::string(kV1) + ", interactiveMode: Never}}", "no command"},
           {"{exec: {apiVersion: " + std::string(kV1) + ", command: a, interactiveMode: Never, env: [{name: 'A=B', value: x}]}}",
            "without '='"},
           {"{auth-provider: {name: gcp}}", "client-go removed them"},
       }) {
    EXPECT_FALSE(applier::load_kubeconfig(kubeconfig(b.user), "", &c, &err)) << b.user;
    EXPECT_NE(err.find(b.why), std::string::npos) << b.user << " -> " << err;
    EXPECT_NE(err.find(dir + "/config"), std::string::npos) << err;  // the file is named
  }
  EXPECT_EQ(applier::encode_base64("ab"), "YWI=");
  EXPECT_EQ(applier::encode_base64("abc"), "YWJj");
  EXPECT_EQ(applier::encode_base64("a"), "YQ==");
}

ExecPluginConfig plugin_config(const std::string& command) {
  ExecPluginConfig p;
  p.api_version = kV1;
  p.command = command;
  p.interactive_mode = "Never";
  p.where = "test kubeconfig: user u";
  p.server = "https://10.0.0.1:6443";
  return p;
}

TEST(ExecCredential, ThePluginRunsOnceWhileItsCredentialIsValidAndAgainAfterExpiryOrA401) {
  std::string dir = temp_dir("kexec-run");
  auto now = std::chrono::system_clock::from_time_t(1795802400 - 60);  // a minute before 18:00Z
  write_file(dir + "/expiry", "2026-11-27T18:00:00Z");
  auto p = plugin_config(counting_plugin(dir));
  p.args = {"--region", "eu 1"};
  p.env = {{"PLUGIN_MODE", "test"}};
  ExecCredentialSource src(p, [&] { return now; });
  ExecCredential c;
  std::string err;
  ASSERT_TRUE(src.current(&c, &err)) << err;
  EXPECT_EQ(c.token, "tok-1");
  ASSERT_TRUE(src.current(&c, &err)) << err;
  EXPECT_EQ(c.token, "tok-1");
  EXPECT_EQ(src.runs(), 1u);
  EXPECT_EQ(read_all(dir + "/args"), "--region eu 1\n");
  std::string env = read_all(dir + "/env");
  EXPECT_NE(env.find("PLUGIN_MODE=test\n"), std::string::npos);
  EXPECT_NE(env.find("KUBERNETES_EXEC_INFO={\"apiVersion\":\"client.authentication.k8s.io/v1\""), std::string::npos);
  EXPECT_NE(env.find("PATH="), std::string::npos);  // the applier's environment is kept
  now += std::chrono::seconds(60);                  // expired
  write_file(dir + "/expiry", "2026-11-27T19:00:00Z");
  ASSERT_TRUE(src.current(&c, &err)) << err;
  EXPECT_EQ(c.token, "tok-2");
  src.invalidate("tok-1");  // an old token refused: the new one stays
  ASSERT_TRUE(src.current(&c, &err));
  EXPECT_EQ(src.runs(), 2u);
  src.invalidate("tok-2");
  ASSERT_TRUE(src.current(&c, &err));
  EXPECT_EQ(c.token, "tok-3");
}

TEST(ExecCredential, PluginFailuresAreOneLineErrorsNamingTheKubeconfigUser) {
  std::string dir = temp_dir("kexec-fail");
  ExecCredential c;
  std::string err;
  ExecCredentialSource failing(plugin_config(script(dir, "fail", "echo 'token expired: run login' >&2\nexit 3\n")));
  EXPECT_FALSE(failing.current(&c, &err));
  EXPECT_NE(err.find("test kubeconfig: user u: exec plugin"), std::string::npos) << err;
  EXPECT_NE(err.find("exit 3: token expired: run login"), std::string::npos) << err;

  auto missing = plugin_config(dir + "/no-such-plugin");
  missing.install_hint = "install it with: apt install get-token";
  ExecCredentialSource absent(missing);
  EXPECT_FALSE(absent.current(&c, &err));
  EXPECT_NE(err.find("cannot run"), std::string::npos) << err;
  EXPECT_NE(err.find("apt install get-token"), std::string::npos) << err;

  ExecCredentialSource garbage(plugin_config(script(dir, "garbage", "echo hello\n")));
  EXPECT_FALSE(garbage.current(&c, &err));
  EXPECT_NE(err.find("not a JSON object"), std::string::npos) << err;

  ExecCredentialSource hung(plugin_config(script(dir, "hung", "exec sleep 30\n")), nullptr, /*timeout_ms=*/300);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(hung.current(&c, &err));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(err.find("no answer within"), std::string::npos) << err;
}

TEST(ExecCredential, AServerRefusingTheTokenGetsAFreshOneOnce) {
  if (!can_run_kube_api_server()) GTEST_SKIP() << "needs python3 (yaml, ssl) and openssl";
  KubeApiServer server;
  KubeApiServerOptions so;
  so.token = "tok-2";  // the plugin's first answer (tok-1) is refused
  ASSERT_TRUE(server.start(so)) << server.error();
  std::string dir = temp_dir("kexec-401");
  std::string plugin = counting_plugin(dir);
  write_file(dir + "/config", "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                              "clusters: [{name: c, cluster: {server: '" + server.url() + "', certificate-authority: " +
                              test_pki().ca_crt + "}}]\n"
                              "users: [{name: u, user: {exec: {apiVersion: " + std::string(kV1) + ", command: " + plugin +
                              ", interactiveMode: Never}}}]\n");
  applier::KubeCredentials creds;
  std::string err;
  ASSERT_TRUE(applier::load_kubeconfig(dir + "/config", "", &creds, &err)) << err;
  auto exec = creds.exec;
  applier::KubeHttpClient client(creds, nullptr);
  auto r = client.get("/api/v1/services", 10);
  EXPECT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(exec->runs(), 2u);
  r = client.get("/api/v1/services", 10);  // the fresh token is kept
  EXPECT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(exec->runs(), 2u);
  // A plugin whose every answer is refused: one retry, then the 401 is the caller's.
  so.token = "never";
  KubeApiServer strict;
  ASSERT_TRUE(strict.start(so)) << strict.error();
  write_file(dir + "/config2", read_all(dir + "/config").replace(read_all(dir + "/config").find(server.url()),
                                                                  server.url().size(), strict.url()));
  ASSERT_TRUE(applier::load_kubeconfig(dir + "/config2", "", &creds, &err)) << err;
  applier::KubeHttpClient client2(creds, nullptr);
  size_t before = creds.exec->runs();
  r = client2.get("/api/v1/services", 10);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(creds.exec->runs() - before, 2u);
}

}  // namespace
}  // namespace kpc::test
