#include "applier/node/metrics.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace kpc::applier {

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

std::vector<double> sync_duration_buckets() {
  std::vector<double> b;
  for (int i = 0; i < 15; ++i) b.push_back(0.001 * std::pow(2.0, i));
  return b;
}

std::vector<double> network_programming_buckets() {
  std::vector<double> b{0.25, 0.5};
  for (int i = 1; i <= 59; ++i) b.push_back(i);
  for (int i = 0; i < 12; ++i) b.push_back(60 + 5 * i);
  for (int i = 0; i < 7; ++i) b.push_back(120 + 30 * i);
  return b;
}

namespace {

// kube-proxy's ip_family label values (v1.IPFamily).
const char* family_label(IPFamily f) { return f == IPFamily::V4 ? "IPv4" : "IPv6"; }

// Prometheus' float text: integers without a fraction, otherwise the shortest round trip.
std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Trim %.17g noise (0.0080000000000000002 -> 0.008) when a shorter form reads back equal.
  for (int prec = 1; prec < 17; ++prec) {
    char s[64];
    std::snprintf(s, sizeof s, "%.*g", prec, v);
    if (std::strtod(s, nullptr) == v) return s;
  }
  return buf;
}

void header(std::string& out, const std::string& name, const char* help, const char* type) {
  out += "# HELP " + name + " [ALPHA] " + help + "\n# TYPE " + name + " " + type + "\n";
}

void histogram(std::string& out, const std::string& name, const std::string& labels, const Histogram& h) {
  uint64_t cum = 0;
  std::string sep = labels.empty() ? "" : labels + ",";
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cum += h.counts[i];
    out += name + "_bucket{" + sep + "le=\"" + num(h.bounds[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += h.counts.back();
  out += name + "_bucket{" + sep + "le=\"+Inf\"} " + std::to_string(cum) + "\n";
  std::string l = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + l + " " + num(h.sum) + "\n" + name + "_count" + l + " " + std::to_string(h.count) + "\n";
}

std::string rfc3339(int64_t wall_ms) {
  time_t s = static_cast<time_t>(wall_ms / 1000);
  struct tm tm;
  gmtime_r(&s, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(wall_ms % 1000));
  return buf;
}

}  // namespace

bool parse_rfc3339_ms(const std::string& t, int64_t* ms) {
  struct tm tm {};
  int y, mo, d, h, mi, s, n = 0;
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &n) != 6 || n != 19) return false;
  tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi, tm.tm_sec = s;
  int64_t frac_ms = 0;
  size_t i = 19;
  if (i < t.size() && t[i] == '.') {
    int64_t scale = 100;
    for (++i; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i, scale /= 10) frac_ms += (t[i] - '0') * scale;
  }
  int64_t offset_s = 0;
  if (i < t.size() && (t[i] == 'Z' || t[i] == 'z')) ++i;
  else if (i + 6 == t.size() && (t[i] == '+' || t[i] == '-') && t[i + 3] == ':') {
    int oh = std::atoi(t.substr(i + 1, 2).c_str()), om = std::atoi(t.substr(i + 4, 2).c_str());
    offset_s = (t[i] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    i += 6;
  } else
    return false;
  if (i != t.size()) return false;
  *ms = (static_cast<int64_t>(timegm(&tm)) - offset_s) * 1000 + frac_ms;
  return true;
}

ApplierMetrics::ApplierMetrics(BackendKind mode, int64_t health_timeout_ms, std::vector<IPFamily> families)
    : mode_(mode), health_timeout_ms_(health_timeout_ms) {
  for (IPFamily f : families) fam_[f];
}

ApplierMetrics::PerFamily& ApplierMetrics::of(IPFamily f) { return fam_[f]; }

void ApplierMetrics::queued(int64_t wall_ms) {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& [f, pf] : fam_) {
    pf.last_queued_timestamp = static_cast<double>(wall_ms) / 1000.0;
    if (pf.oldest_queued_ms < 0) pf.oldest_queued_ms = wall_ms;
  }
}

void ApplierMetrics::synced(const SyncReport& r, int64_t wall_ms) {
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& fr : r.families) {
    if (fr.kind == "skipped") continue;
    PerFamily& pf = of(fr.family);
    double seconds = (fr.compile_ms + fr.verify_ms + fr.apply_ms) / 1000.0;
    pf.sync.observe(seconds);
    if (fr.verify_ms > 0) pf.verify.observe(fr.verify_ms / 1000.0);
    if (fr.fallback) ++pf.verify_failures;
    if (fr.scope_mismatch) ++pf.scope_mismatches;
    if (fr.drift_repaired) ++drift_repairs_;
    if (fr.ok) {
      (fr.kind == "full" ? pf.full : pf.partial).observe(seconds);
      pf.last_timestamp = static_cast<double>(wall_ms) / 1000.0;
      pf.oldest_queued_ms = -1;  // kube-proxy's Updated()
      pf.last_updated_ms = wall_ms;
      if (!fr.rules_total.empty()) pf.rules_total = fr.rules_total;
      if (!fr.rules_written.empty() || mode_ == BackendKind::IPTables) {
        pf.rules_last = fr.rules_written;
        for (const char* t : {"nat", "filter"}) pf.rules_last.try_emplace(t, 0);
      }
    } else {
      if (mode_ == BackendKind::IPTables) {
        ++pf.restore_failures;
        if (fr.kind == "partial") ++pf.partial_restore_failures;
      } else {
        ++pf.nft_sync_failures;
      }
    }
  }
}

void ApplierMetrics::network_programmed(IPFamily f, double seconds) {
  std::lock_guard<std::mutex> g(mu_);
  if (fam_.count(f)) of(f).programming.observe(seconds);
}

void ApplierMetrics::drift_repaired() {
  std::lock_guard<std::mutex> g(mu_);
  ++drift_repairs_;
}

void ApplierMetrics::set_node_eligible(bool eligible) {
  std::lock_guard<std::mutex> g(mu_);
  node_eligible_ = eligible;
}

HealthVerdict ApplierMetrics::health(int64_t wall_ms) const {
  std::lock_guard<std::mutex> g(mu_);
  HealthVerdict v;
  v.node_eligible = node_eligible_;
  for (const auto& [f, pf] : fam_) {
    // Healthy while starting up or synced; unhealthy once a queued update waited too long.
    bool ok = pf.oldest_queued_ms < 0 || wall_ms - pf.oldest_queued_ms < health_timeout_ms_;
    v.family_healthy[family_label(f)] = ok;
    v.healthy = v.healthy && ok;
    v.last_updated_ms = std::max(v.last_updated_ms, pf.last_updated_ms);
  }
  return v;
}

int ApplierMetrics::healthz(bool livez, int64_t wall_ms, std::string* body) {
  HealthVerdict v = health(wall_ms);
  bool ok = livez ? v.healthy : v.healthy && v.node_eligible;
  nlohmann::json j;
  // kube-proxy reports "now" as lastUpdated when healthy (compatibility with older releases).
  j["lastUpdated"] = rfc3339(ok ? wall_ms : v.last_updated_ms);
  j["currentTime"] = rfc3339(wall_ms);
  if (!livez) j["nodeEligible"] = v.node_eligible;
  for (const auto& [f, h] : v.family_healthy) j["status"][f] = {{"healthy", h}};
  *body = j.dump();
  int code = ok ? 200 : 503;
  std::lock_guard<std::mutex> g(mu_);
  ++(livez ? livez_codes_ : healthz_codes_)[std::to_string(code)];
  return code;
}

std::string ApplierMetrics::render() const {
  std::lock_guard<std::mutex> g(mu_);
  std::string out;
  auto each_hist = [&](const std::string& name, const char* help, Histogram PerFamily::*h) {
    header(out, name, help, "histogram");
    for (const auto& [f, pf] : fam_) histogram(out, name, std::string("ip_family=\"") + family_label(f) + "\"", pf.*h);
  };
  auto each_value = [&](const std::string& name, const char* help, const char* type, auto get) {
    header(out, name, help, type);
    for (const auto& [f, pf] : fam_) out += name + "{ip_family=\"" + family_label(f) + "\"} " + num(get(pf)) + "\n";
  };
  each_hist("kubeproxy_sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds", &PerFamily::sync);
  if (mode_ == BackendKind::IPTables) {
    each_hist("kubeproxy_sync_full_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for full resyncs",
              &PerFamily::full);
    each_hist("kubeproxy_sync_partial_proxy_rules_duration_seconds",
              "SyncProxyRules latency in seconds for partial resyncs", &PerFamily::partial);
  }
  each_hist("kubeproxy_network_programming_duration_seconds", "In Cluster Network Programming Latency in seconds",
            &PerFamily::programming);
  each_value("kubeproxy_sync_proxy_rules_last_timestamp_seconds", "The last time proxy rules were successfully synced",
             "gauge", [](const PerFamily& p) { return p.last_timestamp; });
  each_value("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", "The last time a sync of proxy rules was queued",
             "gauge", [](const PerFamily& p) { return p.last_queued_timestamp; });
  if (mode_ == BackendKind::IPTables) {
    each_value("kubeproxy_sync_proxy_rules_iptables_restore_failures_total", "Cumulative proxy iptables restore failures",
               "counter", [](const PerFamily& p) { return static_cast<double>(p.restore_failures); });
    each_value("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
               "Cumulative proxy iptables partial restore failures", "counter",
               [](const PerFamily& p) { return static_cast<double>(p.partial_restore_failures); });
    for (auto [name, help, member] :
         {std::tuple{"kubeproxy_sync_proxy_rules_iptables_total", "Total number of iptables rules owned by kube-proxy",
                     &PerFamily::rules_total},
          std::tuple{"kubeproxy_sync_proxy_rules_iptables_last",
                     "Number of iptables rules written by kube-proxy in last sync", &PerFamily::rules_last}}) {
      header(out, name, help, "gauge");
      for (const auto& [f, pf] : fam_)
        for (const auto& [table, n] : pf.*member)
          out += std::string(name) + "{ip_family=\"" + family_label(f) + "\",table=\"" + table + "\"} " +
                 std::to_string(n) + "\n";
    }
  } else {
    each_value("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", "Cumulative proxy nftables sync failures",
               "counter", [](const PerFamily& p) { return static_cast<double>(p.nft_sync_failures); });
  }
  for (auto [name, help, codes] :
       {std::tuple{"kubeproxy_proxy_healthz_total", "Cumulative proxy healthz HTTP status", &healthz_codes_},
        std::tuple{"kubeproxy_proxy_livez_total", "Cumulative proxy livez HTTP status", &livez_codes_}}) {
    header(out, name, help, "counter");
    for (const auto& [code, n] : *codes) out += std::string(name) + "{code=\"" + code + "\"} " + std::to_string(n) + "\n";
  }
  // kpc's own.
  auto kpc_header = [&](const std::string& name, const char* help, const char* type) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  kpc_header("kpc_partial_verify_failures_total",
             "Partial syncs whose proof (prior + partial == full) failed; the full program was applied instead", "counter");
  for (const auto& [f, pf] : fam_)
    out += std::string("kpc_partial_verify_failures_total{ip_family=\"") + family_label(f) + "\"} " +
           std::to_string(pf.verify_failures) + "\n";
  kpc_header("kpc_partial_verify_duration_seconds", "Time to prove a partial sync equal to the full program", "histogram");
  for (const auto& [f, pf] : fam_)
    histogram(out, "kpc_partial_verify_duration_seconds", std::string("ip_family=\"") + family_label(f) + "\"", pf.verify);
  kpc_header("kpc_nft_scoped_compare_mismatches_total",
             "nftables proofs whose comparison of only the changed objects the periodic whole comparison contradicted "
             "(expected 0; the whole comparison decided)",
             "counter");
  for (const auto& [f, pf] : fam_)
    out += std::string("kpc_nft_scoped_compare_mismatches_total{ip_family=\"") + family_label(f) + "\"} " +
           std::to_string(pf.scope_mismatches) + "\n";
  kpc_header("kpc_drift_repairs_total", "Drift repairs applied: the periodic check found the kernel differing from the last applied program (kube-proxy's part) and repaired it", "counter");
  out += "kpc_drift_repairs_total " + std::to_string(drift_repairs_) + "\n";
  return out;
}

}  // namespace kpc::applier
