// A tiny HTTP/1.1 server for /metrics, /healthz and /livez: GET only, one request per
// connection (Connection: close), requests bounded (8 KiB, 2 s), one thread. No dependency:
// what is served is small and scraped every few seconds at most.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace kpc::applier {

struct HttpResponse {
  int status = 404;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body = "not found\n";
};

class TinyHttpServer {
 public:
  using Handler = std::function<HttpResponse(const std::string& path)>;
  TinyHttpServer() = default;
  ~TinyHttpServer();
  TinyHttpServer(const TinyHttpServer&) = delete;
  TinyHttpServer& operator=(const TinyHttpServer&) = delete;

  /// Binds "HOST:PORT" ("0.0.0.0:10249", "127.0.0.1:0", "[::1]:10249") and serves in a thread.
  /// False with *error when the address is malformed or cannot be bound.
  bool start(const std::string& bind_address, Handler handler, std::string* error);
  void stop();
  int port() const { return port_; }

 private:
  void serve();
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stopping_{false};
  Handler handler_;
  std::thread thread_;
};

}  // namespace kpc::applier
