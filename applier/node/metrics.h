// What operators see (issue 15 §3): kube-proxy's Prometheus metrics — the same names, labels
// and histogram buckets as pkg/proxy/metrics (v1.33+: ip_family labels) — plus kpc's own, and
// kube-proxy's /healthz and /livez verdicts (pkg/proxy/healthcheck: healthy unless an update
// was queued for a family more than healthTimeout = 2 × syncPeriod ago and no sync of that
// family has succeeded since; /healthz also needs the node to be eligible).
//
// Written by the loop's thread, read by the HTTP server's: every member is behind one mutex.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "applier/node/sync_loop.h"

namespace kpc::applier {

/// A Prometheus histogram: cumulative buckets by upper bound, plus +Inf, sum and count.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  ///< per bound (not cumulative); the last slot is +Inf
  double sum = 0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v);
};
/// kube-proxy's sync-duration buckets: ExponentialBuckets(0.001, 2, 15).
std::vector<double> sync_duration_buckets();
/// kube-proxy's network-programming buckets: 0.25, 0.5, 1..59, 60..115 by 5, 120..300 by 30.
std::vector<double> network_programming_buckets();

struct HealthVerdict {
  bool healthy = true;   ///< /livez
  bool node_eligible = true;
  int64_t last_updated_ms = 0;  ///< wall clock
  std::map<std::string, bool> family_healthy;
};

class ApplierMetrics {
 public:
  /// health_timeout_ms: 2 × syncPeriod; iptables: the iptables-only metrics are exported.
  ApplierMetrics(BackendKind mode, int64_t health_timeout_ms, std::vector<IPFamily> families);

  /// An object event reached the loop (kube-proxy's QueuedUpdate and last_queued_timestamp).
  void queued(int64_t wall_ms);
  /// A sync's report: durations, counters, rule counts, and Updated() for the families that applied.
  void synced(const SyncReport& r, int64_t wall_ms);
  /// kube-proxy's network programming latency: trigger time (the EndpointSlice's
  /// endpoints.kubernetes.io/last-change-trigger-time) to the sync that applied it.
  void network_programmed(IPFamily f, double seconds);
  /// kpc: a drift repair was applied (also counted from SyncReport::drift_repaired by synced()).
  void drift_repaired();
  void set_node_eligible(bool eligible);

  HealthVerdict health(int64_t wall_ms) const;
  /// /healthz and /livez: status code and kube-proxy's JSON body; counts the answer.
  int healthz(bool livez, int64_t wall_ms, std::string* body);
  /// The Prometheus text exposition (format 0.0.4).
  std::string render() const;

 private:
  struct PerFamily {
    Histogram sync{sync_duration_buckets()}, full{sync_duration_buckets()}, partial{sync_duration_buckets()};
    Histogram programming{network_programming_buckets()};
    Histogram verify{sync_duration_buckets()};
    double last_timestamp = 0, last_queued_timestamp = 0;
    uint64_t restore_failures = 0, partial_restore_failures = 0, nft_sync_failures = 0;
    uint64_t verify_failures = 0;
    uint64_t scope_mismatches = 0;  ///< nftables: scoped comparisons the whole one contradicted
    std::map<std::string, size_t> rules_total, rules_last;  ///< by table
    int64_t oldest_queued_ms = -1;  ///< -1: nothing queued since the last successful sync
    int64_t last_updated_ms = 0;
  };
  PerFamily& of(IPFamily f);
  mutable std::mutex mu_;
  BackendKind mode_;
  int64_t health_timeout_ms_;
  std::map<IPFamily, PerFamily> fam_;
  uint64_t drift_repairs_ = 0;
  std::map<std::string, uint64_t> healthz_codes_, livez_codes_;
  bool node_eligible_ = true;
};

/// RFC 3339 ("2024-05-01T10:00:00Z", "…T10:00:00.123456Z", "…+02:00") to ms since the epoch;
/// false when malformed.
bool parse_rfc3339_ms(const std::string& text, int64_t* ms);

}  // namespace kpc::applier
