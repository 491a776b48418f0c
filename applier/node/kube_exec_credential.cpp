#include "applier/node/kube_exec_credential.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>

#include "applier/node/process.h"

namespace kpc::applier {

namespace {

using json = nlohmann::json;

// RFC 3339 as Kubernetes writes metav1.Time: "2026-11-27T18:00:00Z", also with fractional
// seconds or a numeric offset.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(const std::string& s) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, &consumed) != 6)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  size_t i = static_cast<size_t>(consumed);
  if (i < s.size() && s[i] == '.') {  // fractional seconds: ignored (a token's lifetime is minutes)
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  }
  long offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int h = 0, m = 0;
    if (std::sscanf(s.c_str() + i + 1, "%2d:%2d", &h, &m) != 2) return std::nullopt;
    offset = (s[i] == '+' ? 1 : -1) * (h * 3600L + m * 60L);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  time_t t = timegm(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t - offset);
}

std::string one_line(std::string s, size_t max = 300) {
  if (s.size() > max) s = s.substr(0, max) + "...";
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::string encode_base64(std::string_view bytes) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += {a[v >> 18], a[(v >> 12) & 63], a[(v >> 6) & 63], a[v & 63]};
  }
  if (i + 1 == bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    out += {a[v >> 18], a[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += {a[v >> 18], a[(v >> 12) & 63], a[(v >> 6) & 63], '='};
  }
  return out;
}

bool parse_exec_credential(const std::string& text, const std::string& api_version, ExecCredential* out,
                           std::string* error) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return *error = "its output is not a JSON object", false;
  auto str = [&](const json& o, const char* k) -> std::string {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (str(j, "kind") != "ExecCredential") return *error = "its output is not an ExecCredential", false;
  if (str(j, "apiVersion") != api_version)
    return *error = "its output is apiVersion \"" + one_line(str(j, "apiVersion"), 80) + "\", the kubeconfig asked for " +
                    api_version,
           false;
  auto st = j.find("status");
  if (st == j.end() || !st->is_object()) return *error = "its output has no status", false;
  ExecCredential c;
  c.token = str(*st, "token");
  c.client_cert_pem = str(*st, "clientCertificateData");
  c.client_key_pem = str(*st, "clientKeyData");
  if (c.client_cert_pem.empty() != c.client_key_pem.empty())
    return *error = "its status has clientCertificateData or clientKeyData without the other", false;
  if (c.token.empty() && c.client_cert_pem.empty())
    return *error = "its status has neither a token nor a client certificate", false;
  for (char ch : c.token)
    if (ch == '\n' || ch == '\r') return *error = "its token contains a line break", false;  // header injection
  if (auto e = str(*st, "expirationTimestamp"); !e.empty()) {
    c.expiry = parse_rfc3339(e);
    if (!c.expiry) return *error = "its expirationTimestamp \"" + one_line(e, 60) + "\" is not RFC 3339", false;
  }
  *out = std::move(c);
  return true;
}

std::string exec_info_json(const ExecPluginConfig& c) {
  json spec = {{"interactive", false}};
  if (c.provide_cluster_info) {
    json cluster = {{"server", c.server}};
    if (!c.ca_pem.empty()) cluster["certificate-authority-data"] = encode_base64(c.ca_pem);
    if (c.insecure_skip_tls_verify) cluster["insecure-skip-tls-verify"] = true;
    spec["cluster"] = cluster;
  }
  return json{{"apiVersion", c.api_version}, {"kind", "ExecCredential"}, {"spec", spec}}.dump();
}

ExecCredentialSource::ExecCredentialSource(ExecPluginConfig config, Clock now, int timeout_ms)
    : config_(std::move(config)), now_(now ? std::move(now) : [] { return std::chrono::system_clock::now(); }),
      timeout_ms_(timeout_ms) {}

size_t ExecCredentialSource::runs() const {
  std::lock_guard<std::mutex> l(mu_);
  return runs_;
}

void ExecCredentialSource::invalidate(const std::string& token) {
  std::lock_guard<std::mutex> l(mu_);
  // Only the credential that was refused: another thread may have fetched a new one already.
  if (held_ && held_->token == token) held_.reset();
}

bool ExecCredentialSource::current(ExecCredential* out, std::string* error) {
  std::lock_guard<std::mutex> l(mu_);
  if (!held_ || (held_->expiry && now_() >= *held_->expiry)) {
    held_.reset();
    if (!run(error)) return false;
  }
  *out = *held_;
  return true;
}

bool ExecCredentialSource::run(std::string* error) {
  const ExecPluginConfig& c = config_;
  auto fail = [&](const std::string& m) { return *error = c.where + ": exec plugin " + c.command + ": " + m, false; };
  std::vector<std::string> argv{c.command};
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  ProcessOptions po;
  po.timeout_ms = timeout_ms_;
  po.extra_env.push_back("KUBERNETES_EXEC_INFO=" + exec_info_json(c));
  for (const auto& [k, v] : c.env) po.extra_env.push_back(k + "=" + v);
  ++runs_;
  auto r = run_process(argv, "", po);
  if (r.timed_out) return fail("no answer within " + std::to_string(timeout_ms_ / 1000) + " s (killed)");
  if (r.exit_code != 0) {
    std::string m = r.exit_code == -1 && r.err.rfind("cannot run", 0) == 0 ? one_line(r.err)
                                                                          : "exit " + std::to_string(r.exit_code) + ": " + one_line(r.err);
    if (!c.install_hint.empty() && r.err.rfind("cannot run", 0) == 0) m += " (" + one_line(c.install_hint) + ")";
    return fail(m);
  }
  ExecCredential cred;
  std::string e;
  if (!parse_exec_credential(r.out, c.api_version, &cred, &e)) return fail(e);
  held_ = std::move(cred);
  return true;
}

}  // namespace kpc::applier
