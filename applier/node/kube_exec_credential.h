// kubeconfig `users[].user.exec`: a credential plugin (aws eks get-token, gke-gcloud-auth-plugin,
// kubelogin, ...) run as client-go runs it — the command with its args and env, the
// ExecCredential request in KUBERNETES_EXEC_INFO, never interactive (the applier is a daemon),
// the answer's token or client certificate used until its expirationTimestamp, and run again
// when it has expired or the API server answered 401 to it.
// Protocol: https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kpc::applier {

struct ExecPluginConfig {
  std::string api_version;  ///< client.authentication.k8s.io/v1 or /v1beta1
  std::string command;      ///< as the kubeconfig says (a path with '/' resolved against its directory)
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string install_hint;
  bool provide_cluster_info = false;
  std::string interactive_mode;  ///< Never / IfAvailable / Always ("" for v1beta1 = IfAvailable)
  // The cluster, for provideClusterInfo.
  std::string server, ca_pem;
  bool insecure_skip_tls_verify = false;
  std::string where;  ///< "kubeconfig F: user U" for messages
};

struct ExecCredential {
  std::string token;
  std::string client_cert_pem, client_key_pem;
  std::optional<std::chrono::system_clock::time_point> expiry;  ///< none: valid until a 401
};

/// Parses a plugin's stdout (an ExecCredential of `api_version`); false with *error.
bool parse_exec_credential(const std::string& json, const std::string& api_version, ExecCredential* out,
                           std::string* error);

/// The KUBERNETES_EXEC_INFO value client-go sets for this plugin.
std::string exec_info_json(const ExecPluginConfig& c);

/// Runs the plugin when needed and keeps its answer; thread-safe (one per credentials set).
class ExecCredentialSource {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;
  explicit ExecCredentialSource(ExecPluginConfig config, Clock now = nullptr, int timeout_ms = 60000);

  /// The credential to use now (runs the plugin if none is held or it expired).
  bool current(ExecCredential* out, std::string* error);
  /// The API server refused `token` (401): the next current() runs the plugin again.
  void invalidate(const std::string& token);
  /// How many times the plugin ran (tests, logs).
  size_t runs() const;
  const ExecPluginConfig& config() const { return config_; }

 private:
  bool run(std::string* error);
  ExecPluginConfig config_;
  Clock now_;
  int timeout_ms_;
  mutable std::mutex mu_;
  std::optional<ExecCredential> held_;
  size_t runs_ = 0;
};

/// RFC 4648 base64 with padding.
std::string encode_base64(std::string_view bytes);

}  // namespace kpc::applier
