// The `--kubeconfig` / in-cluster source: list and watch Services, EndpointSlices
// (discovery.k8s.io/v1) and this Node (fieldSelector metadata.name=NODE) from the API server,
// as client-go's reflectors do for kube-proxy:
//
//   list (paged, limit/continue) ──► watch ?resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=T
//     ▲  410 Gone (HTTP, or an ERROR event with code 410): relist at once, deletions inferred
//     │  connection dropped / HTTP error: back off (capped exponential, jitter), then watch
//     │     again from the last resourceVersion seen (events or bookmarks) — nothing replayed
//     │     twice (ResourceState drops an event whose resourceVersion it already holds)
//     └─ server ended the watch (timeoutSeconds): watch again at once from the last RV
//
// One thread per resource moves bytes (libcurl, blocking); decoding and bookkeeping are
// kube_resource.h's. Events are queued for the thread that owns the SyncLoop, which polls
// fd() and calls drain() — the SyncLoop is never touched from these threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "applier/node/kube_credentials.h"
#include "applier/node/kube_resource.h"

namespace kpc::applier {

struct KubeApiOptions {
  std::string node_name;            ///< this Node (fieldSelector metadata.name=...)
  /// Also ServiceCIDRs (nftables mode). An API server that does not serve them (404) counts
  /// as having none: the source is synced without them.
  bool service_cidrs = false;
  long watch_timeout_s = 300;       ///< timeoutSeconds of each watch (client-go: 5–10 min)
  long list_timeout_s = 60;
  long list_page_size = 500;        ///< client-go's default page size
  int64_t backoff_initial_ms = 800; ///< client-go's reflector backoff: 800 ms doubling to 30 s
  int64_t backoff_max_ms = 30'000;
  double backoff_jitter = 1.0;      ///< the wait is d × (1 + jitter × U[0,1)), then capped
  uint64_t seed = 0;                ///< jitter's random seed (0 = from the clock)
};

/// Capped exponential backoff with jitter (wait.Backoff's shape).
class Backoff {
 public:
  Backoff(int64_t initial_ms, int64_t max_ms, double jitter, uint64_t seed);
  /// The next wait, and doubles the base up to the cap.
  int64_t next_ms();
  void reset() { base_ = initial_; }

 private:
  int64_t initial_, max_, base_;
  double jitter_;
  std::mt19937_64 rng_;
};

/// Counters per resource (tests, logs).
struct ResourceStats {
  uint64_t lists = 0, relists_gone = 0, watches = 0, reconnects = 0, http_errors = 0;
  uint64_t bookmarks = 0, events = 0, invalid_objects = 0, replays_dropped = 0;
  std::string resource_version;
  std::string last_error;
  int64_t last_backoff_ms = 0;
};

class KubeApiSource {
 public:
  using LogFn = std::function<void(const std::string& json_line)>;
  KubeApiSource(KubeCredentials creds, KubeApiOptions opts, LogFn log);
  ~KubeApiSource();  ///< stops and joins the threads
  KubeApiSource(const KubeApiSource&) = delete;
  KubeApiSource& operator=(const KubeApiSource&) = delete;

  void start();
  void stop();
  /// Readable while events are queued (an eventfd).
  int fd() const;
  /// The queued events, in arrival order (each resource's order kept); clears fd().
  std::vector<WatchEvent> drain();
  /// Every resource has been listed once (kube-proxy waits for this before its first sync).
  bool synced() const;
  /// Snapshot of the counters of "services", "endpointslices", "nodes", "servicecidrs".
  ResourceStats stats(const std::string& resource) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kpc::applier
