#include "applier/node/kube_api_source.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "applier/node/kube_http.h"

namespace kpc::applier {

Backoff::Backoff(int64_t initial_ms, int64_t max_ms, double jitter, uint64_t seed)
    : initial_(initial_ms), max_(max_ms), base_(initial_ms), jitter_(jitter),
      rng_(seed ? seed : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) {}

int64_t Backoff::next_ms() {
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  auto wait = static_cast<int64_t>(static_cast<double>(base_) * (1.0 + jitter_ * u));
  base_ = std::min(max_, base_ * 2);
  return std::min(wait, max_);
}

namespace {

const char* resource_name(WatchEvent::Kind k) {
  switch (k) {
    case WatchEvent::Kind::Service: return "services";
    case WatchEvent::Kind::EndpointSlice: return "endpointslices";
    case WatchEvent::Kind::Node: return "nodes";
    case WatchEvent::Kind::ServiceCIDR: return "servicecidrs";
  }
  return "?";
}

}  // namespace

struct KubeApiSource::Impl {
  KubeCredentials creds;
  KubeApiOptions opts;
  LogFn log;
  std::atomic<bool> stopping{false};
  int efd = -1;
  std::vector<std::thread> threads;
  std::vector<KubeResource> resources;

  mutable std::mutex mu;  // guards queue, listed, stats
  std::condition_variable cv;
  std::vector<WatchEvent> queue;
  std::vector<bool> listed;
  std::vector<ResourceStats> stats;

  void emit(nlohmann::json j) {
    if (log) log(j.dump());
  }
  void push(size_t idx, std::vector<WatchEvent> events, bool now_listed) {
    std::lock_guard<std::mutex> g(mu);
    if (now_listed) listed[idx] = true;
    stats[idx].events += events.size();
    for (auto& e : events) queue.push_back(std::move(e));
    uint64_t one = 1;
    if (write(efd, &one, sizeof one) < 0) { /* the counter is saturated: already readable */ }
  }
  template <class F>
  void update_stats(size_t idx, F f) {
    std::lock_guard<std::mutex> g(mu);
    f(stats[idx]);
  }
  /// Sleeps ms unless stopped; false when stopping.
  bool sleep_ms(int64_t ms) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, std::chrono::milliseconds(ms), [&] { return stopping.load(); });
    return !stopping.load();
  }
  void run(size_t idx);
  bool list(size_t idx, KubeHttpClient& http, ResourceState& st, Backoff& bo, bool* not_served);
};

// One full list, page by page; false after an error (logged, backed off).
bool KubeApiSource::Impl::list(size_t idx, KubeHttpClient& http, ResourceState& st, Backoff& bo, bool* not_served) {
  const KubeResource& res = resources[idx];
  const char* name = resource_name(res.kind);
  st.begin_list();
  std::string cont;
  size_t pages = 0;
  do {
    std::string path = res.path + "?limit=" + std::to_string(opts.list_page_size);
    if (!res.field_selector.empty()) path += "&fieldSelector=" + url_encode(res.field_selector);
    if (!res.label_selector.empty()) path += "&labelSelector=" + url_encode(res.label_selector);
    if (!cont.empty()) path += "&continue=" + url_encode(cont);
    HttpResult r = http.get(path, opts.list_timeout_s);
    if (stopping) return false;
    if (r.status == 404 && res.kind == WatchEvent::Kind::ServiceCIDR) {
      // An API server without networking.k8s.io/v1 ServiceCIDRs (before Kubernetes 1.33):
      // there are none to program; kube-proxy's informer would not run either.
      emit({{"msg", "not served by this API server: not watched"}, {"resource", name}});
      update_stats(idx, [&](ResourceStats& s) { s.last_error = "404: not served"; });
      push(idx, {}, true);
      *not_served = true;
      return false;
    }
    std::string error;
    std::vector<std::string> errors;
    bool ok = r.status == 200 && r.transport_error.empty() &&
              st.list_page(r.body, "GET " + res.path + " (page " + std::to_string(++pages) + ")", &cont, &errors, &error);
    for (const auto& e : errors) emit({{"msg", "invalid object skipped"}, {"resource", name}, {"error", e}});
    update_stats(idx, [&](ResourceStats& s) { s.invalid_objects += errors.size(); });
    if (!ok) {
      if (error.empty()) error = r.describe();
      int64_t wait = bo.next_ms();
      update_stats(idx, [&](ResourceStats& s) {
        ++s.http_errors;
        s.last_error = error;
        s.last_backoff_ms = wait;
      });
      emit({{"msg", "list failed"}, {"resource", name}, {"error", error}, {"server", creds.server},
            {"credentials", creds.origin}, {"retry_in_ms", wait}});
      sleep_ms(wait);
      return false;
    }
  } while (!cont.empty());
  auto events = st.end_list();
  size_t n = events.size();
  update_stats(idx, [&](ResourceStats& s) {
    ++s.lists;
    s.resource_version = st.resource_version();
  });
  push(idx, std::move(events), true);
  emit({{"msg", "listed"}, {"resource", name}, {"objects", st.held()}, {"events", n},
        {"resourceVersion", st.resource_version()}});
  bo.reset();
  return true;
}

void KubeApiSource::Impl::run(size_t idx) {
  const KubeResource& res = resources[idx];
  const char* name = resource_name(res.kind);
  KubeHttpClient http(creds, &stopping);
  ResourceState st(res.kind);
  Backoff bo(opts.backoff_initial_ms, opts.backoff_max_ms, opts.backoff_jitter, opts.seed ? opts.seed + idx : 0);
  bool need_list = true;
  while (!stopping) {
    if (need_list) {
      bool not_served = false;
      if (!list(idx, http, st, bo, &not_served)) {
        if (not_served) return;
        continue;
      }
      need_list = false;
    }
    std::string path = res.path + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + url_encode(st.resource_version()) +
                       "&timeoutSeconds=" + std::to_string(opts.watch_timeout_s);
    if (!res.field_selector.empty()) path += "&fieldSelector=" + url_encode(res.field_selector);
    if (!res.label_selector.empty()) path += "&labelSelector=" + url_encode(res.label_selector);
    update_stats(idx, [&](ResourceStats& s) { ++s.watches; });
    std::string buf;
    bool gone = false;
    size_t lines = 0;
    std::string source = "watch " + res.path;
    auto started = std::chrono::steady_clock::now();
    auto on_data = [&](std::string_view chunk) {
      buf.append(chunk);
      std::vector<WatchEvent> events;
      size_t start = 0;
      for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view line = std::string_view(buf).substr(start, nl - start);
        if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
        ++lines;
        std::string error;
        auto lr = st.watch_line(line, source, &events, &error);
        if (lr == ResourceState::LineResult::Gone) {
          gone = true;
          emit({{"msg", "watch expired (410 Gone): relisting"}, {"resource", name}, {"detail", error}});
          break;
        }
        if (lr == ResourceState::LineResult::Error) {
          emit({{"msg", "invalid watch event skipped"}, {"resource", name}, {"error", error}});
          update_stats(idx, [&](ResourceStats& s) { ++s.invalid_objects; });
        }
      }
      buf.erase(0, start);
      update_stats(idx, [&](ResourceStats& s) {
        s.resource_version = st.resource_version();
        s.bookmarks = st.bookmarks();
        s.replays_dropped = st.replays_dropped();
      });
      if (!events.empty()) push(idx, std::move(events), false);
      return !gone && !stopping;
    };
    HttpResult r = http.stream(path, on_data, opts.watch_timeout_s + 60);
    if (stopping) break;
    if (lines > 0) bo.reset();
    if (gone || r.status == 410) {
      if (!gone) emit({{"msg", "watch expired (410 Gone): relisting"}, {"resource", name}, {"detail", r.describe()}});
      update_stats(idx, [&](ResourceStats& s) { ++s.relists_gone; });
      need_list = true;
      continue;
    }
    bool failed = !r.transport_error.empty() || r.status != 200;
    auto lasted = std::chrono::steady_clock::now() - started;
    if (!failed && (lines > 0 || lasted > std::chrono::milliseconds(500))) continue;  // the server's timeout: watch again
    std::string error = failed ? r.describe() : "the watch ended at once without events";
    int64_t wait = bo.next_ms();
    update_stats(idx, [&](ResourceStats& s) {
      if (r.status != 200 && r.status != 0) ++s.http_errors;
      else ++s.reconnects;
      s.last_error = error;
      s.last_backoff_ms = wait;
    });
    emit({{"msg", "watch interrupted"}, {"resource", name}, {"error", error}, {"resourceVersion", st.resource_version()},
          {"retry_in_ms", wait}});
    sleep_ms(wait);
  }
}

KubeApiSource::KubeApiSource(KubeCredentials creds, KubeApiOptions opts, LogFn log) : impl_(std::make_unique<Impl>()) {
  kube_http_global_init();
  impl_->creds = std::move(creds);
  impl_->opts = std::move(opts);
  impl_->log = std::move(log);
  impl_->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  impl_->resources = {services_resource(), endpoint_slices_resource(), node_resource(impl_->opts.node_name)};
  if (impl_->opts.service_cidrs) impl_->resources.push_back(service_cidrs_resource());
  impl_->listed.assign(impl_->resources.size(), false);
  impl_->stats.resize(impl_->resources.size());
}

KubeApiSource::~KubeApiSource() {
  stop();
  if (impl_->efd >= 0) close(impl_->efd);
}

void KubeApiSource::start() {
  for (size_t i = 0; i < impl_->resources.size(); ++i) impl_->threads.emplace_back([this, i] { impl_->run(i); });
}

void KubeApiSource::stop() {
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
}

int KubeApiSource::fd() const { return impl_->efd; }

std::vector<WatchEvent> KubeApiSource::drain() {
  uint64_t v;
  if (read(impl_->efd, &v, sizeof v) < 0) { /* nothing queued */ }
  std::lock_guard<std::mutex> g(impl_->mu);
  return std::exchange(impl_->queue, {});
}

bool KubeApiSource::synced() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  for (bool b : impl_->listed)
    if (!b) return false;
  return true;
}

ResourceStats KubeApiSource::stats(const std::string& resource) const {
  std::lock_guard<std::mutex> g(impl_->mu);
  for (size_t i = 0; i < impl_->resources.size(); ++i)
    if (resource == resource_name(impl_->resources[i].kind)) return impl_->stats[i];
  return {};
}

}  // namespace kpc::applier
