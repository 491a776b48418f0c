// Where the API server is and how to authenticate to it: from a kubeconfig file (its
// current-context, as client-go reads it) or from the in-cluster service account
// (KUBERNETES_SERVICE_HOST/PORT and /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}).
// Everything is read into memory here (certificates and keys as PEM text, inline base64
// `*-data` fields decoded), except a token file, which is re-read before every request:
// projected service-account tokens rotate under a running process.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "applier/node/kube_exec_credential.h"

namespace kpc::applier {

struct KubeCredentials {
  std::string server;        ///< "https://10.96.0.1:443" (no trailing slash)
  std::string ca_pem;        ///< "" = the system's trust store
  bool insecure_skip_tls_verify = false;
  std::string client_cert_pem, client_key_pem;
  std::string token;         ///< a fixed bearer token
  std::string token_file;    ///< re-read before each request (wins over `token`)
  std::string origin;        ///< "kubeconfig FILE (context C)" / "in-cluster service account": for messages
  /// users[].user.exec: a credential plugin (wins over the fields above); shared by the copies.
  std::shared_ptr<ExecCredentialSource> exec;

  /// The bearer token to send now ("" = none); false with *error when the token file cannot be read.
  bool current_token(std::string* token, std::string* error) const;

  struct Auth {
    std::string token, client_cert_pem, client_key_pem;
  };
  /// Everything to authenticate one request with (the exec plugin runs here when needed).
  bool current_auth(Auth* out, std::string* error) const;
};

/// Reads a kubeconfig: `context` "" = its current-context. Relative file paths are relative
/// to the kubeconfig's directory (as client-go resolves them). False with *error (one line,
/// naming the file and the field) on anything kpc cannot use: no such context, no server,
/// auth-provider plugins (removed from client-go), an interactive-only exec plugin, basic auth,
/// tls-server-name, proxy-url.
bool load_kubeconfig(const std::string& path, const std::string& context, KubeCredentials* out, std::string* error);

/// The in-cluster service account. `getenv` is injectable for tests (nullptr: ::getenv);
/// `sa_dir` holds `token` and `ca.crt`. False with *error when not in a cluster.
bool load_in_cluster(const std::string& sa_dir, KubeCredentials* out, std::string* error,
                     const std::function<const char*(const char*)>& getenv = nullptr);

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

/// RFC 4648 base64 (whitespace ignored); nullopt when malformed.
std::optional<std::string> decode_base64(std::string_view text);

}  // namespace kpc::applier
