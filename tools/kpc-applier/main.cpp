// kpc-applier: the on-node program (issue 15, first increment; docs/applier.md). Options ->
// a source, a dataplane and a SyncLoop from applier/node; this file only wires them.
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "compiler/support/allocator.h"
#include "compiler/support/version.h"
#include "tools/cli_docs/cli_checks.h"
#include "tools/cli_docs/cli_docs.h"
#include <algorithm>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <thread>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>

#include "applier/node/cleanup.h"
#include "applier/node/kernel_dataplane.h"
#include "applier/node/http_server.h"
#include "applier/node/kube_api_source.h"
#include "applier/node/metrics.h"
#include "applier/node/sources.h"
#include "applier/node/sync_loop.h"
#include "applier/node/stream_source.h"
#include "applier/node/watch_events.h"

using namespace kpc;
using namespace kpc::applier;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

void log_line(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}
int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void log_msg(const std::string& msg, const std::string& detail = "") {
  nlohmann::json j{{"msg", msg}};
  if (!detail.empty()) j["detail"] = detail;
  log_line(j.dump());
}

const char* kHelpFooter = R"(
Applies kube-proxy's programs (iptables or nftables mode, from the KubeProxyConfiguration) for
this node, with kube-proxy's rate limits, and proves every partial sync equal to the full one on
the node's current state before the kernel sees it (docs/applier.md).

Examples:
  kpc-applier --watch cluster/ --config kube-proxy.yaml --node node-a --state-dir /var/lib/kpc-applier
  kubectl get services,endpointslices,nodes -A --watch --output-watch-events -o json |
      kpc-applier --watch - --config kube-proxy.yaml --node node-a
  kpc-applier --kubeconfig /etc/kubernetes/kube-proxy.conf --config kube-proxy.yaml --node node-a
  kpc-applier --config kube-proxy.yaml                 in a pod: the in-cluster service account
  kpc-applier --watch cluster/ --once                  one sync, then exit (tests, cron; with
                                                       --kubeconfig: after the initial lists)
  kpc-applier --cleanup --dry-run                      what --cleanup would remove
  kpc-applier --cleanup                                remove kube-proxy's rules (KEP-2448: only on request)

Exit codes: 0 ok (--once: the sync applied; --cleanup: everything removed); 1 a sync failed
(--once), --cleanup could not remove something, or the --watch - stream ended without --once
(the rules are kept: restart the pipe); 2 usage, configuration or snapshot error.
Logs: one JSON line per sync on stderr (kind, services changed, bytes, compile/verify/apply ms, verdict).
Metrics (Prometheus, kube-proxy's names) on --metrics-bind-address /metrics; kube-proxy's /healthz
and /livez on --healthz-bind-address (neither with --once).
Drift: every syncPeriod the kernel is compared with the last sync's full program on a thread of
its own, and the smallest repair applied (docs/applier.md). Not in this increment: IPVS.
)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kpc-applier: kube-proxy's programs, compiled by kpc, proven and applied on this node"};
  app.footer(kHelpFooter);
  std::string watch, config_file, node, state_dir, verify = "always", iptables = "auto";
  std::string ipt_restore, ip6t_restore, nft_bin = "nft", family = "both", apply_with = "tools";
  std::string kubeconfig, kube_context, sa_dir = kServiceAccountDir;
  std::optional<std::string> metrics_bind, healthz_bind;
  bool once = false, cleanup = false, dry_run = false;
  int64_t debounce_ms = 200;
  app.add_option("--watch", watch, "snapshot file or directory (re-read on change), or - for kubectl watch events on stdin");
  app.add_option("--kubeconfig", kubeconfig, "list and watch the API server named by this kubeconfig's current context");
  app.add_option("--context", kube_context, "with --kubeconfig: this context instead of the current one");
  app.add_option("--service-account-dir", sa_dir, "in-cluster credentials (token, ca.crt); without --watch and --kubeconfig, "
                 "used when KUBERNETES_SERVICE_HOST is set")->capture_default_str();
  app.add_option("--metrics-bind-address", metrics_bind,
                 "HOST:PORT of /metrics (default: the configuration's metricsBindAddress, 127.0.0.1:10249; \"\" = off)");
  app.add_option("--healthz-bind-address", healthz_bind,
                 "HOST:PORT of /healthz and /livez (default: the configuration's healthzBindAddress, 0.0.0.0:10256; \"\" = off)");
  app.add_option("--config", config_file, "KubeProxyConfiguration file (and optionally a NodeEnvironment): overrides the snapshot's");
  app.add_option("--node", node, "this node's name (kube-proxy's --hostname-override)");
  app.add_option("--state-dir", state_dir, "where the last applied/failed programs and proof failures are kept");
  app.add_option("--verify", verify, "prove partial syncs before applying them: always, sampled (1 in 10), off")
      ->check(CLI::IsMember({"always", "sampled", "off"}));
  app.add_option("--iptables", iptables, "iptables flavour: legacy, nft, auto (iptables-wrapper's rule)")
      ->check(CLI::IsMember({"legacy", "nft", "auto"}));
  app.add_option("--iptables-restore", ipt_restore, "the IPv4 restore binary (default: the flavour's)");
  app.add_option("--ip6tables-restore", ip6t_restore, "the IPv6 restore binary (default: the flavour's)");
  app.add_option("--nft", nft_bin, "the nft binary");
  app.add_option("--apply-with", apply_with, "tools: iptables-restore and nft, as kube-proxy runs them; in-process: "
                 "nftables as netlink batches built in-process (no nft cache fetch), libnftables for what "
                 "the encoder does not cover, for nft's error text and for reads (iptables stays with the tools)")
      ->check(CLI::IsMember({"tools", "in-process"}))->capture_default_str();
  app.add_option("--family", family, "IP families to program: ipv4, ipv6, both (those the node has addresses of)")
      ->check(CLI::IsMember({"ipv4", "ipv6", "both"}));
  app.add_option("--debounce-ms", debounce_ms, "--watch PATH: quiet time before a re-read (ms)")
      ->check(kpc::cli_checks::whole_number_at_least(0));
  app.add_flag("--once", once, "one sync, then exit (--watch -: after the end of stdin)");
  app.add_flag("--cleanup", cleanup, "remove kube-proxy's iptables chains and nft tables, and exit");
  app.add_flag("--dry-run", dry_run, "with --cleanup: print what would be removed");
  app.set_version_flag("--version", std::string(kpc::kVersionLine) + "\n" + kpc::allocator_line());
  // `kpc-applier __complete bash|zsh`, `__man`: generated from the options above (the build runs them).
  if (int rc = 0; kpc::cli_docs::handle(app, "kpc-applier", std::string("kpc ") + kpc::kVersion, argc, argv, &rc)) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (cleanup) {
    CleanupOptions co;
    co.dry_run = dry_run;
    co.nft = nft_bin;
    auto r = run_cleanup(co);
    for (const auto& l : r.lines) std::printf("%s\n", l.c_str());
    for (const auto& e : r.errors) std::fprintf(stderr, "kpc-applier: %s\n", e.c_str());
    if (r.lines.empty()) std::printf("nothing of kube-proxy's to remove\n");
    return r.ok ? 0 : 1;
  }
  if (dry_run) {
    std::fprintf(stderr, "kpc-applier: --dry-run goes with --cleanup\n");
    return 2;
  }
  // ---- the source: --watch PATH, --watch -, --kubeconfig, or the in-cluster service account
  if (!watch.empty() && !kubeconfig.empty()) {
    std::fprintf(stderr, "kpc-applier: --watch and --kubeconfig are two sources; give one\n");
    return 2;
  }
  std::optional<KubeCredentials> creds;
  if (watch.empty()) {
    KubeCredentials c;
    std::string err;
    bool ok = !kubeconfig.empty() ? load_kubeconfig(kubeconfig, kube_context, &c, &err)
              : std::getenv("KUBERNETES_SERVICE_HOST") ? load_in_cluster(sa_dir, &c, &err)
                                                     : (err = "a source is required: --watch PATH, --watch -, --kubeconfig "
                                                              "FILE, or run in a pod (KUBERNETES_SERVICE_HOST); see --help",
                                                        false);
    if (!ok) {
      std::fprintf(stderr, "kpc-applier: %s\n", err.c_str());
      return 2;
    }
    creds = std::move(c);
  }

  // ---- the node's configuration
  Snapshot initial;
  std::optional<Snapshot> config_snap;
  if (!config_file.empty()) {
    Snapshot c;
    std::string diags;
    if (!load_snapshot_paths({config_file}, "", &c, &diags)) {
      std::fprintf(stderr, "%skpc-applier: %s: cannot load the configuration\n", diags.c_str(), config_file.c_str());
      return 2;
    }
    if (!c.config.present) {
      std::fprintf(stderr, "kpc-applier: %s: no KubeProxyConfiguration\n", config_file.c_str());
      return 2;
    }
    if (!node.empty()) c.config.hostname_override = node;
    config_snap = std::move(c);
  }
  if (!watch.empty() && watch != "-") {
    std::string diags;
    if (!load_snapshot_paths({watch}, config_snap ? "" : node, &initial, &diags)) {
      std::fprintf(stderr, "%skpc-applier: %s: the snapshot does not load\n", diags.c_str(), watch.c_str());
      return 2;
    }
    if (!diags.empty()) std::fprintf(stderr, "%s", diags.c_str());
  }
  const ProxyConfig& cfg = config_snap ? config_snap->config : initial.config;
  std::string err;
  auto lo = loop_options_for(cfg, &err);
  if (!lo) {
    std::fprintf(stderr, "kpc-applier: %s\n", err.c_str());
    return 2;
  }
  lo->verify = *parse_verify_mode(verify);
  lo->state_dir = state_dir;
  if (family == "ipv4") lo->families = {IPFamily::V4};
  if (family == "ipv6") lo->families = {IPFamily::V6};

  KernelTools tools;
  tools.iptables_restore = ipt_restore;
  tools.ip6tables_restore = ip6t_restore;
  tools.nft = nft_bin;
  tools.apply_with = *parse_apply_with(apply_with);
  if (lo->mode == BackendKind::IPTables) {
    auto choice = *parse_flavor_choice(iptables);
    if (choice == IptablesFlavorChoice::Auto) {
      size_t l = 0, n = 0;
      tools.flavor = detect_flavor(&l, &n);
      log_line(nlohmann::json{{"msg", "iptables flavour"}, {"flavour", verifier::flavor_name(tools.flavor)},
                              {"legacy_kube_chains", l}, {"nft_kube_chains", n}}
                   .dump());
    } else {
      tools.flavor = choice == IptablesFlavorChoice::Legacy ? verifier::Flavor::Legacy : verifier::Flavor::Nft;
    }
  }
  if (tools.apply_with == ApplyWith::InProcess)
    // What "in-process" covers: nftables only (docs/applier.md "In-process apply": libiptc does not pay).
    log_line(nlohmann::json{{"msg", "apply with"}, {"nftables", "netlink batches (in-process; libnftables for the rest)"},
                            {"iptables", "the tools (iptables-restore)"}}.dump());
  // The periodic drift check runs on a thread of its own (slow at 10,000 Services: a kernel
  // read and a full compile); syncs are not delayed by it (sync_loop.h, drift_thread).
  lo->drift_thread = !once;
  KernelDataplane dp(tools);
  SteadyClock clock;
  SyncLoop loop(*lo, clock, dp, log_line);
  if (config_snap) loop.set_config(config_snap->config, config_snap->env.present ? &config_snap->env : nullptr);
  if (!watch.empty() && watch != "-") loop.replace_all(initial);

  // ---- what operators see: metrics and health (kube-proxy's; not for a one-shot run)
  ApplierMetrics metrics(lo->mode, 2 * lo->sync_period_ms, lo->families);
  TinyHttpServer metrics_server, healthz_server;
  if (!once) {
    std::string mb = metrics_bind.value_or(cfg.metrics_bind_address), hb = healthz_bind.value_or(cfg.healthz_bind_address);
    std::string err;
    // As in kube-proxy, a server that cannot bind is logged, not fatal: the node keeps its rules.
    if (!mb.empty() && !metrics_server.start(mb, [&](const std::string& path) {
          if (path != "/metrics") return HttpResponse{};
          return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics.render()};
        }, &err))
      log_line(nlohmann::json{{"msg", "metrics server not started"}, {"error", err}}.dump());
    else if (!mb.empty())
      log_line(nlohmann::json{{"msg", "metrics server"}, {"address", mb}, {"port", metrics_server.port()}}.dump());
    if (!hb.empty() && !healthz_server.start(hb, [&](const std::string& path) {
          if (path != "/healthz" && path != "/livez") return HttpResponse{};
          HttpResponse r;
          r.status = metrics.healthz(path == "/livez", wall_ms(), &r.body);
          r.content_type = "application/json";
          return r;
        }, &err))
      log_line(nlohmann::json{{"msg", "healthz server not started"}, {"error", err}}.dump());
    else if (!hb.empty())
      log_line(nlohmann::json{{"msg", "healthz server"}, {"address", hb}, {"port", healthz_server.port()}}.dump());
  }
  // kube-proxy's network programming latency: an EndpointSlice's last-change-trigger-time
  // annotation to the sync of its family that applied it.
  std::map<IPFamily, std::vector<int64_t>> triggers;
  auto on_event = [&](const WatchEvent& e) {
    loop.apply_event(e);
    metrics.queued(wall_ms());
    if (e.slice) {
      auto a = e.slice->meta.annotations.find("endpoints.kubernetes.io/last-change-trigger-time");
      int64_t t;
      if (a != e.slice->meta.annotations.end() && parse_rfc3339_ms(a->second, &t))
        triggers[e.slice->address_type == AddressType::IPv6 ? IPFamily::V6 : IPFamily::V4].push_back(t);
    }
    if (e.kind == WatchEvent::Kind::Node && creds) metrics.set_node_eligible(e.type != WatchEvent::Type::Deleted);
  };
  auto on_sync = [&](const SyncReport& r) {
    int64_t now = wall_ms();
    metrics.synced(r, now);
    for (const auto& fr : r.families) {
      if (!fr.ok || fr.kind == "skipped") continue;
      for (int64_t t : triggers[fr.family]) metrics.network_programmed(fr.family, static_cast<double>(now - t) / 1000.0);
      triggers[fr.family].clear();
    }
    return r.ok;
  };
  if (creds) metrics.set_node_eligible(false);  // kube-proxy: not eligible until its Node is known

  std::unique_ptr<KubeApiSource> api;
  if (creds) {
    // This Node's name: --node, the configuration's hostnameOverride, else the host name
    // (lower-cased, as kube-proxy does).
    std::string node_name = !node.empty() ? node : cfg.hostname_override;
    if (node_name.empty()) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      node_name = host;
      for (char& ch : node_name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    if (!config_snap) {
      ProxyConfig c = cfg;
      c.hostname_override = node_name;
      loop.set_config(c, nullptr);
    }
    KubeApiOptions ko;
    ko.node_name = node_name;
    ko.service_cidrs = lo->mode == BackendKind::NFTables;  // only the nftables mode programs them
    log_line(nlohmann::json{{"msg", "kube-api source"}, {"server", creds->server}, {"credentials", creds->origin},
                            {"node", node_name}}
                 .dump());
    api = std::make_unique<KubeApiSource>(*creds, ko, log_line);
    api->start();
  }

  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  std::thread drift_checker;
  std::atomic<bool> drift_stop{false};
  if (lo->drift_thread)
    drift_checker = std::thread([&] {
      // Below the sync thread (nice +10, this thread only): on a busy node the check yields
      // the CPU to the syncs, whose latency is the figure that matters.
      if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10) != 0)
        log_line(nlohmann::json{{"msg", "drift checker priority unchanged"}, {"error", std::strerror(errno)}}.dump());
      while (!drift_stop) {
        loop.wait_drift_jobs(1000);
        for (const auto& o : loop.run_drift_checks())
          if (o.result == "repaired") metrics.drift_repaired();
      }
    });
  struct Joiner {
    SyncLoop& loop;
    std::thread& t;
    std::atomic<bool>& stop;
    ~Joiner() {
      stop = true;
      loop.stop_drift_waits();
      if (t.joinable()) t.join();
    }
  } join_drift_checker{loop, drift_checker, drift_stop};

  // ---- --watch PATH --once / the stdin stream
  if (!api && watch != "-" && once) return loop.sync_now().ok ? 0 : 1;

  std::unique_ptr<PathWatcher> watcher;
  // --watch -: read and decoded on a thread of its own, events queued (no backpressure on
  // the writer while a sync runs; stream_source.h).
  std::unique_ptr<StreamWatchSource> stream;
  bool stdin_open = watch == "-";
  // stdin: the first sync after the initial list (a quiet period) or EOF; the API: after every
  // resource has been listed once (kube-proxy waits for its informers to sync).
  bool ready = watch != "-" && !api;
  int64_t reload_at = -1, last_input = -1;
  bool any_input = false;
  if (!api && watch != "-") {
    watcher = std::make_unique<PathWatcher>(watch);
    if (!watcher->ok()) {
      std::fprintf(stderr, "kpc-applier: --watch %s: %s\n", watch.c_str(), watcher->error().c_str());
      return 2;
    }
  } else if (!api) {
    stream = std::make_unique<StreamWatchSource>(0);
    stream->start();
  }
  bool last_ok = true;
  while (!g_stop) {
    int64_t now = clock.now_ms();
    int64_t wake = ready ? loop.next_sync_ms() : now + 1000;
    if (reload_at >= 0) wake = std::min(wake, reload_at);
    if (!ready && any_input) wake = std::min(wake, last_input + debounce_ms);
    pollfd p{api ? api->fd() : watcher ? watcher->fd() : (stdin_open ? stream->fd() : -1), POLLIN, 0};
    int timeout = static_cast<int>(std::clamp<int64_t>(wake - now, 0, 60'000));
    int pr = poll(&p, 1, timeout);
    now = clock.now_ms();
    if (pr > 0 && watcher && watcher->drain()) reload_at = now + debounce_ms;
    if (api) {
      bool synced = api->synced();  // before drain: the events of a finished list are queued by then
      for (const auto& e : api->drain()) on_event(e);
      if (!ready && synced) {
        ready = true;
        log_msg("kube-api source synced");
        if (once) {
          int rc = loop.sync_now().ok ? 0 : 1;
          api->stop();
          return rc;
        }
      }
    }
    if (pr > 0 && stream && stdin_open) {
      StreamWatchSource::Batch b = stream->drain();
      for (const auto& it : b.items)
        if (it.is_event) on_event(it.event);
        else log_msg("malformed watch event skipped", it.error);
      if (b.input) any_input = true, last_input = now;
      if (b.ended) {
        stdin_open = false;
        ready = true;
        log_msg("watch stream ended", std::to_string(b.events_seen) + " events");
      }
      if (!stdin_open && once) return loop.sync_now().ok ? 0 : 1;
      if (!stdin_open) {
        // The stream cannot be reopened, and an applier that goes on without a source would
        // keep green health checks over rules that silently age. So: apply what arrived whole,
        // keep the rules (KEP-2448: nothing is removed), exit 1 for the supervisor to restart
        // the `kubectl … | kpc-applier --watch -` pipe (whose first sync is full).
        bool ok = on_sync(loop.sync_now());
        log_line(nlohmann::json{{"msg", "exiting: the watch stream ended"}, {"rules", "kept"}, {"last_sync_ok", ok},
                                {"exit_code", 1}}
                     .dump());
        return 1;
      }
    }
    if (!ready && any_input && now >= last_input + debounce_ms) ready = true;
    if (reload_at >= 0 && now >= reload_at) {
      reload_at = -1;
      Snapshot s;
      std::string diags;
      if (load_snapshot_paths({watch}, config_snap ? "" : node, &s, &diags)) loop.replace_all(s), metrics.queued(wall_ms());
      else log_msg("snapshot does not load; keeping the current state", diags);
    }
    if (ready)
      if (auto r = loop.tick()) last_ok = on_sync(*r);
  }
  log_msg("stopping (signal)");
  return last_ok ? 0 : 1;
}
