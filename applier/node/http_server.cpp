#include "applier/node/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace kpc::applier {

namespace {

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

// Reads the request head (up to the blank line), bounded in size and time.
bool read_head(int fd, std::string* head) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  char buf[2048];
  while (head->find("\r\n\r\n") == std::string::npos && head->find("\n\n") == std::string::npos) {
    if (head->size() > 8192) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    head->append(buf, static_cast<size_t>(n));
  }
  return true;
}

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

TinyHttpServer::~TinyHttpServer() { stop(); }

bool TinyHttpServer::start(const std::string& bind, Handler handler, std::string* error) {
  size_t colon = bind.rfind(':');
  if (colon == std::string::npos) return *error = "\"" + bind + "\" is not HOST:PORT", false;
  std::string host = bind.substr(0, colon), port_text = bind.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end || port < 0 || port > 65535) return *error = "\"" + bind + "\": bad port", false;
  sockaddr_storage ss{};
  socklen_t len;
  int family;
  if (host.empty()) host = "0.0.0.0";
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    family = v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    family = v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v6;
  } else {
    return *error = "\"" + bind + "\": the host must be an IP address", false;
  }
  fd_ = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd_, 16) != 0) {
    *error = bind + ": " + std::strerror(errno);
    if (fd_ >= 0) close(fd_), fd_ = -1;
    return false;
  }
  sockaddr_storage got{};
  socklen_t gl = sizeof got;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&got), &gl);
  port_ = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&got)->sin_port
                                  : reinterpret_cast<sockaddr_in6*>(&got)->sin6_port);
  handler_ = std::move(handler);
  thread_ = std::thread([this] { serve(); });
  return true;
}

void TinyHttpServer::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) close(fd_), fd_ = -1;
}

void TinyHttpServer::serve() {
  while (!stopping_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::string head;
    HttpResponse r;
    if (!read_head(c, &head)) {
      close(c);
      continue;
    }
    // "GET /path?query HTTP/1.1"
    size_t sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
    std::string method = head.substr(0, sp1);
    std::string target = sp1 == std::string::npos ? "" : head.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string path = target.substr(0, target.find('?'));
    if (method != "GET" && method != "HEAD") r = {405, "text/plain; charset=utf-8", "only GET\n"};
    else r = handler_(path);
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\nContent-Type: " +
                      r.content_type + "\r\nX-Content-Type-Options: nosniff\r\nContent-Length: " +
                      std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n";
    if (method != "HEAD") out += r.body;
    write_all(c, out);
    close(c);
  }
}

}  // namespace kpc::applier
