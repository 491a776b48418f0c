#include "applier/node/kube_http.h"

#include <curl/curl.h>

#include <mutex>

namespace kpc::applier {

namespace {

// A list page or an error Status is far below this; a larger body is refused, not buffered.
constexpr size_t kMaxBody = size_t{512} << 20;

struct Transfer {
  CURL* curl = nullptr;
  const std::function<bool(std::string_view)>* on_data = nullptr;
  const std::atomic<bool>* stop = nullptr;
  HttpResult* result = nullptr;
  bool too_large = false;
};

size_t on_write(char* ptr, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->on_data && status == 200) {
    if (!(*t->on_data)(std::string_view(ptr, len))) {
      t->result->aborted = true;
      return 0;  // abort the transfer
    }
    return len;
  }
  if (t->result->body.size() + len > kMaxBody) {
    t->too_large = true;
    return 0;
  }
  t->result->body.append(ptr, len);
  return len;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->stop && t->stop->load()) {
    t->result->aborted = true;
    return 1;
  }
  return 0;
}

void set_blob(CURL* c, CURLoption opt, const std::string& pem) {
  curl_blob b{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
  curl_easy_setopt(c, opt, &b);
}

}  // namespace

std::string HttpResult::describe() const {
  if (!transport_error.empty()) return "connection: " + transport_error;
  std::string m = "HTTP " + std::to_string(status);
  // The body of an error is a metav1.Status; its message is the useful part, but keep it short.
  std::string b = body.substr(0, 300);
  for (char& c : b)
    if (c == '\n' || c == '\r') c = ' ';
  if (!b.empty()) m += ": " + b;
  return m;
}

void kube_http_global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string url_encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~')
      out.push_back(static_cast<char>(c));
    else
      out += {'%', hex[c >> 4], hex[c & 15]};
  }
  return out;
}

KubeHttpClient::KubeHttpClient(KubeCredentials creds, const std::atomic<bool>* stop)
    : creds_(std::move(creds)), stop_(stop) {
  kube_http_global_init();
  curl_ = curl_easy_init();
}

KubeHttpClient::~KubeHttpClient() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

HttpResult KubeHttpClient::get(const std::string& path, long timeout_s) { return perform(path, timeout_s, 0, nullptr); }

HttpResult KubeHttpClient::stream(const std::string& path, const std::function<bool(std::string_view)>& on_data,
                                  long idle_timeout_s) {
  return perform(path, 0, idle_timeout_s, &on_data);
}

HttpResult KubeHttpClient::perform(const std::string& path, long timeout_s, long idle_timeout_s,
                                   const std::function<bool(std::string_view)>* on_data) {
  HttpResult r = perform_once(path, timeout_s, idle_timeout_s, on_data);
  // An exec plugin's credential the server refuses (revoked, or expired early): run the
  // plugin again and retry once, as client-go does. A 401 delivers no data to on_data.
  if (r.status == 401 && creds_.exec && !r.sent_token.empty()) {
    creds_.exec->invalidate(r.sent_token);
    r = perform_once(path, timeout_s, idle_timeout_s, on_data);
  }
  return r;
}

HttpResult KubeHttpClient::perform_once(const std::string& path, long timeout_s, long idle_timeout_s,
                                        const std::function<bool(std::string_view)>* on_data) {
  HttpResult r;
  auto* c = static_cast<CURL*>(curl_);
  if (!c) return r.transport_error = "curl_easy_init failed", r;
  KubeCredentials::Auth auth_now;
  std::string err;
  if (!creds_.current_auth(&auth_now, &err)) return r.transport_error = "credentials: " + err, r;
  const std::string& token = auth_now.token;
  r.sent_token = token;

  curl_easy_reset(c);
  Transfer t{c, on_data, stop_, &r};
  std::string url = creds_.server + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(c, CURLOPT_USERAGENT, "kpc-applier");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  if (timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
  if (idle_timeout_s > 0) {
    // A watch that receives nothing (not even a bookmark) for this long is a dead connection.
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, idle_timeout_s);
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  if (!creds_.ca_pem.empty()) set_blob(c, CURLOPT_CAINFO_BLOB, creds_.ca_pem);
  if (creds_.insecure_skip_tls_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!auth_now.client_cert_pem.empty()) {
    set_blob(c, CURLOPT_SSLCERT_BLOB, auth_now.client_cert_pem);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    set_blob(c, CURLOPT_SSLKEY_BLOB, auth_now.client_key_pem);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  std::string auth;
  if (!token.empty()) {
    auth = "Authorization: Bearer " + token;
    headers = curl_slist_append(headers, auth.c_str());
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);

  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(headers);
  if (t.too_large) r.transport_error = "response larger than 512 MiB";
  else if (rc != CURLE_OK && !r.aborted) r.transport_error = curl_easy_strerror(rc);
  if (!r.transport_error.empty() && rc == CURLE_OPERATION_TIMEDOUT && idle_timeout_s > 0)
    r.transport_error = "nothing received for " + std::to_string(idle_timeout_s) + " s";
  return r;
}

}  // namespace kpc::applier
