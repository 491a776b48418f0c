// HTTPS GETs to the API server with libcurl: one request/response (a list page) or one
// streamed response (a watch), with the credentials of kube_credentials.h (CA, client
// certificate and key from memory; a bearer token read before each request). One client per
// thread (a curl easy handle is not shared); connections are reused between requests.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

#include "applier/node/kube_credentials.h"

namespace kpc::applier {

struct HttpResult {
  long status = 0;          ///< HTTP status; 0 when no response came (see transport_error)
  std::string body;         ///< the body (streams: only when status != 200, the Status object)
  std::string transport_error;  ///< connection refused, TLS failure, reset, timeout ... ("" = none)
  bool aborted = false;     ///< stopped by the stop flag or by on_data returning false
  std::string sent_token;   ///< the bearer token the request carried (a 401 invalidates exactly it)
  /// One line for logs: "HTTP 401: Unauthorized" / "connection: ...".
  std::string describe() const;
};

class KubeHttpClient {
 public:
  /// `stop` (may be null) aborts a request in progress within about a second.
  KubeHttpClient(KubeCredentials creds, const std::atomic<bool>* stop);
  ~KubeHttpClient();
  KubeHttpClient(const KubeHttpClient&) = delete;
  KubeHttpClient& operator=(const KubeHttpClient&) = delete;

  /// A whole response, bounded by timeout_s.
  HttpResult get(const std::string& path_and_query, long timeout_s);
  /// A streamed 200 response, each chunk to on_data (false = stop); ends when the server ends
  /// it, the connection drops, or nothing arrived for idle_timeout_s.
  HttpResult stream(const std::string& path_and_query, const std::function<bool(std::string_view)>& on_data,
                    long idle_timeout_s);

 private:
  HttpResult perform(const std::string& path, long timeout_s, long idle_timeout_s,
                     const std::function<bool(std::string_view)>* on_data);
  HttpResult perform_once(const std::string& path, long timeout_s, long idle_timeout_s,
                          const std::function<bool(std::string_view)>* on_data);
  KubeCredentials creds_;
  const std::atomic<bool>* stop_;
  void* curl_ = nullptr;
};

/// curl_global_init, once per process (call from the main thread before any client exists).
void kube_http_global_init();

/// Percent-encodes a query value.
std::string url_encode(std::string_view s);

}  // namespace kpc::applier
