// Test side of tests/support/kube_api_server.py, the local HTTPS stand-in for the API server:
// a throw-away PKI made with `openssl` (a CA, a server certificate for 127.0.0.1, a client
// certificate), the server process (optionally inside a network namespace) driven by JSON
// commands over its stdin/stdout, kubeconfig files pointing at it, and a background process
// helper for running kpc-applier against it.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kpc::test {

struct TestPki {
  std::string dir, ca_crt, server_crt, server_key, client_crt, client_key;
  bool ok = false;
  std::string error;
};
/// Made once per test process (openssl is slow-ish); ok == false when openssl is missing.
const TestPki& test_pki();

/// True when python3 (with the yaml module) and openssl are there to run the test server.
bool can_run_kube_api_server();

/// A child process with pipes to its stdin and stdout; stderr to a file. Killed on destruction.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  bool start(const std::vector<std::string>& argv, const std::string& stderr_file);
  /// One line of stdout (without '\n'); false on EOF or after timeout_ms.
  bool read_line(std::string* line, int timeout_ms);
  bool write_all(const std::string& text);
  /// SIGTERM, wait up to timeout_ms, then SIGKILL; the exit code (-1 when signalled).
  int stop(int timeout_ms = 5000);
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buf_;
};

struct KubeApiServerOptions {
  std::string token;                 ///< required bearer token ("" = none)
  bool require_client_cert = false;
  std::vector<std::string> objects;  ///< YAML files whose Services, EndpointSlices, Nodes it starts with
  std::string netns;                 ///< run inside this network namespace ("" = here)
  std::vector<std::string> not_served;  ///< resource paths answered 404 (an older API server)
};

class KubeApiServer {
 public:
  bool start(const KubeApiServerOptions& o);
  ~KubeApiServer();
  int port() const { return port_; }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  /// One command; the reply ({"ok": false, "error"} when the server could not do it).
  nlohmann::json command(const nlohmann::json& c);
  const std::string& error() const { return error_; }
  std::string stderr_text() const;

 private:
  ChildProcess proc_;
  int port_ = 0;
  std::string error_, stderr_file_;
};

enum class KubeconfigAuth { Token, ClientCertFiles, ClientCertInline, None };
/// Writes a kubeconfig for `server_url` (CA inline when auth is ClientCertInline, as a file
/// otherwise) with its current-context set; returns its path.
std::string write_kubeconfig(const std::string& dir, const std::string& server_url, KubeconfigAuth auth,
                             const std::string& token = "");

}  // namespace kpc::test
