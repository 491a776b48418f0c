#include "applier/node/kube_credentials.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kpc::applier {

namespace {

// Credentials files are small; a megabyte is far beyond any certificate chain or token.
constexpr size_t kMaxCredentialFile = size_t{1} << 20;

bool read_small_file(const std::string& path, std::string* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return *error = path + ": cannot be read", false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  if (out->size() > kMaxCredentialFile) return *error = path + ": larger than 1 MiB", false;
  return true;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
  return s.substr(i);
}

std::string resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  return base_dir + "/" + p;
}

// One field of a kubeconfig section: either FIELD (a file) or FIELD-data (inline base64).
bool pem_field(const YAML::Node& sec, const std::string& file_key, const std::string& base_dir, std::string* out,
               std::string* error, const std::string& where) {
  if (auto d = sec[file_key + "-data"]; d && d.IsScalar()) {
    auto v = decode_base64(d.as<std::string>());
    if (!v) return *error = where + "." + file_key + "-data: not base64", false;
    *out = *v;
    return true;
  }
  if (auto f = sec[file_key]; f && f.IsScalar()) {
    std::string e;
    if (!read_small_file(resolve(base_dir, f.as<std::string>()), out, &e))
      return *error = where + "." + file_key + ": " + e, false;
  }
  return true;
}

// The entry named `name` in a kubeconfig list (clusters, users, contexts): its inner map.
YAML::Node named(const YAML::Node& root, const char* list, const char* inner, const std::string& name) {
  YAML::Node l = root[list];
  if (!l || !l.IsSequence()) return YAML::Node();
  for (const auto& e : l)
    if (e.IsMap() && e["name"] && e["name"].IsScalar() && e["name"].as<std::string>() == name) return e[inner];
  return YAML::Node();
}

std::string scalar(const YAML::Node& sec, const char* key) {
  auto v = sec[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

// users[].user.exec -> an ExecCredentialSource on `c` (c.server and c.ca_pem already read).
bool exec_plugin(const YAML::Node& x, const std::string& base_dir, KubeCredentials& c, const std::string& where,
                 std::string* why) {
  if (!x.IsMap()) return *why = "not a map", false;
  ExecPluginConfig p;
  p.where = where;
  p.api_version = scalar(x, "apiVersion");
  if (p.api_version != "client.authentication.k8s.io/v1" && p.api_version != "client.authentication.k8s.io/v1beta1")
    return *why = "apiVersion \"" + p.api_version.substr(0, 80) +
                  "\" is not client.authentication.k8s.io/v1 or /v1beta1 (v1alpha1 was removed in Kubernetes 1.24)",
           false;
  p.command = scalar(x, "command");
  if (p.command.empty()) return *why = "no command", false;
  // client-go: a command with a path separator is relative to the kubeconfig; a bare name is looked up on PATH.
  if (p.command.find('/') != std::string::npos) p.command = resolve(base_dir, p.command);
  if (auto a = x["args"]; a) {
    if (!a.IsSequence()) return *why = "args is not a list", false;
    for (const auto& e : a) {
      if (!e.IsScalar()) return *why = "args has an entry that is not a string", false;
      p.args.push_back(e.as<std::string>());
    }
  }
  if (auto env = x["env"]; env) {
    if (!env.IsSequence()) return *why = "env is not a list", false;
    for (const auto& e : env) {
      std::string n = e.IsMap() ? scalar(e, "name") : "";
      if (n.empty() || n.find('=') != std::string::npos || !e["value"] || !e["value"].IsScalar())
        return *why = "env entries need a name (without '=') and a value", false;
      p.env.emplace_back(n, e["value"].as<std::string>());
    }
  }
  p.install_hint = scalar(x, "installHint");
  p.provide_cluster_info = scalar(x, "provideClusterInfo") == "true";
  p.interactive_mode = scalar(x, "interactiveMode");
  if (p.api_version.ends_with("/v1") && p.interactive_mode.empty())
    return *why = "interactiveMode is required by client.authentication.k8s.io/v1", false;
  if (!p.interactive_mode.empty() && p.interactive_mode != "Never" && p.interactive_mode != "IfAvailable" &&
      p.interactive_mode != "Always")
    return *why = "interactiveMode must be Never, IfAvailable or Always", false;
  if (p.interactive_mode == "Always")
    return *why = "interactiveMode Always needs a terminal; kpc-applier runs without one (use Never or IfAvailable)", false;
  p.server = c.server;
  p.ca_pem = c.ca_pem;
  p.insecure_skip_tls_verify = c.insecure_skip_tls_verify;
  c.exec = std::make_shared<ExecCredentialSource>(std::move(p));
  return true;
}

}  // namespace

std::optional<std::string> decode_base64(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0, pad = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') {
      ++pad;
      continue;
    } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    else return std::nullopt;
    if (pad) return std::nullopt;  // data after padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (pad > 2 || bits >= 6) return std::nullopt;
  return out;
}

bool KubeCredentials::current_auth(Auth* out, std::string* error) const {
  if (exec) {
    ExecCredential c;
    if (!exec->current(&c, error)) return false;
    // The plugin's certificate if it gave one, else the kubeconfig's own (client-go merges them so).
    if (c.client_cert_pem.empty()) *out = Auth{c.token, client_cert_pem, client_key_pem};
    else *out = Auth{c.token, c.client_cert_pem, c.client_key_pem};
    return true;
  }
  out->client_cert_pem = client_cert_pem;
  out->client_key_pem = client_key_pem;
  return current_token(&out->token, error);
}

bool KubeCredentials::current_token(std::string* t, std::string* error) const {
  if (exec) {
    ExecCredential c;
    if (!exec->current(&c, error)) return false;
    return *t = c.token, true;
  }
  if (token_file.empty()) return *t = token, true;
  std::string text;
  if (!read_small_file(token_file, &text, error)) return false;
  *t = trim(text);
  return true;
}

bool load_kubeconfig(const std::string& path, const std::string& context, KubeCredentials* out, std::string* error) {
  std::string text;
  if (!read_small_file(path, &text, error)) return *error = "kubeconfig " + *error, false;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return *error = "kubeconfig " + path + ": " + e.what(), false;
  }
  auto fail = [&](const std::string& m) { return *error = "kubeconfig " + path + ": " + m, false; };
  if (!root.IsMap()) return fail("not a kubeconfig (a YAML map)");
  std::string base_dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  std::string ctx_name = context.empty() ? scalar(root, "current-context") : context;
  if (ctx_name.empty()) return fail("no current-context");
  YAML::Node ctx = named(root, "contexts", "context", ctx_name);
  if (!ctx || !ctx.IsMap()) return fail("no context \"" + ctx_name + "\" in contexts");
  std::string cluster_name = scalar(ctx, "cluster"), user_name = scalar(ctx, "user");
  YAML::Node cluster = named(root, "clusters", "cluster", cluster_name);
  if (!cluster || !cluster.IsMap()) return fail("context " + ctx_name + ": no cluster \"" + cluster_name + "\"");
  KubeCredentials c;
  c.origin = "kubeconfig " + path + " (context " + ctx_name + ")";
  c.server = scalar(cluster, "server");
  while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
  if (c.server.empty()) return fail("cluster " + cluster_name + ": no server");
  if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0)
    return fail("cluster " + cluster_name + ": server \"" + c.server.substr(0, 100) + "\" is not an http(s) URL");
  c.insecure_skip_tls_verify = scalar(cluster, "insecure-skip-tls-verify") == "true";
  if (!scalar(cluster, "tls-server-name").empty() || !scalar(cluster, "proxy-url").empty())
    return fail("cluster " + cluster_name + ": tls-server-name and proxy-url are not supported");
  std::string e;
  if (!pem_field(cluster, "certificate-authority", base_dir, &c.ca_pem, &e, "cluster " + cluster_name)) return fail(e);
  if (!user_name.empty()) {
    YAML::Node user = named(root, "users", "user", user_name);
    if (!user) return fail("context " + ctx_name + ": no user \"" + user_name + "\"");
    if (user.IsMap()) {
      if (user["auth-provider"])
        return fail("user " + user_name +
                    ": auth-provider plugins are not supported (client-go removed them in 1.26; use an exec plugin, "
                    "a token, tokenFile or client certificate)");
      if (auto x = user["exec"]; x) {
        std::string why;
        if (!exec_plugin(x, base_dir, c, "kubeconfig " + path + ": user " + user_name, &why))
          return fail("user " + user_name + ": exec: " + why);
      }
      if (user["username"] || user["password"]) return fail("user " + user_name + ": basic auth is not supported");
      if (!pem_field(user, "client-certificate", base_dir, &c.client_cert_pem, &e, "user " + user_name) ||
          !pem_field(user, "client-key", base_dir, &c.client_key_pem, &e, "user " + user_name))
        return fail(e);
      if (c.client_cert_pem.empty() != c.client_key_pem.empty())
        return fail("user " + user_name + ": a client certificate needs its key (and the key its certificate)");
      c.token = scalar(user, "token");
      if (auto tf = scalar(user, "tokenFile"); !tf.empty()) c.token_file = resolve(base_dir, tf);
    }
  }
  *out = std::move(c);
  return true;
}

bool load_in_cluster(const std::string& sa_dir, KubeCredentials* out, std::string* error,
                     const std::function<const char*(const char*)>& getenv_fn) {
  auto get = [&](const char* k) -> std::string {
    const char* v = getenv_fn ? getenv_fn(k) : std::getenv(k);
    return v ? v : "";
  };
  std::string host = get("KUBERNETES_SERVICE_HOST"), port = get("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty())
    return *error = "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (or give --kubeconfig)", false;
  KubeCredentials c;
  c.origin = "in-cluster service account (" + sa_dir + ")";
  // An IPv6 service host needs brackets in a URL.
  c.server = "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
  c.token_file = sa_dir + "/token";
  std::string e;
  if (!read_small_file(sa_dir + "/ca.crt", &c.ca_pem, &e)) return *error = "in-cluster: " + e, false;
  std::string t;
  if (!c.current_token(&t, &e)) return *error = "in-cluster: " + e, false;
  *out = std::move(c);
  return true;
}

}  // namespace kpc::applier
