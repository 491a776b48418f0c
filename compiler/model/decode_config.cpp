// kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration and kpc.dev/v1alpha1
// NodeEnvironment. Both are decoded strictly (unknown fields are errors), as
// kube-proxy's own strict config decoding does: a typo must not silently turn
// into a default.
#include "compiler/model/decode.h"
#include "compiler/model/names.h"
#include "compiler/model/reader.h"
#include "compiler/support/text.h"

namespace kpc {
namespace {

void duration(ObjectReader& r, const DocNode* parent, const char* key, const std::string& path, Duration* out) {
  auto s = r.str(parent, key, path);
  if (!s) return;
  auto d = parse_go_duration(*s);
  if (!d || d->ns < 0) {
    r.error(DiagCode::InvalidDuration, parent->get(key)->pos, path, "\"" + *s + "\" is not a valid duration (e.g. \"30s\", \"1m0s\")");
    return;
  }
  *out = *d;
}

void masquerade_bit(ObjectReader& r, const DocNode* parent, const std::string& path, int32_t* out) {
  if (auto b = r.integer(parent, "masqueradeBit", join_path(path, "masqueradeBit"), 0, 31, DiagCode::InvalidConfig))
    *out = static_cast<int32_t>(*b);
}

std::vector<CIDR> cidr_list(ObjectReader& r, const DocNode* parent, const char* key, const std::string& path) {
  std::vector<CIDR> out;
  const DocNode* list = r.seq(parent, key, path);
  for (size_t i = 0; list && i < list->items.size(); ++i) {
    std::string p = index_path(path, i);
    if (auto s = r.as_str(list->items[i], p))
      if (auto c = r.cidr_text(*s, list->items[i].pos, p)) out.push_back(*c);
  }
  return out;
}

void decode_iptables(ObjectReader& r, const DocNode* cfg, ProxyConfig* c) {
  const DocNode* ipt = r.map(cfg, "iptables", "iptables");
  if (!ipt) return;
  r.reject_unknown(*ipt, "iptables", {"masqueradeAll", "masqueradeBit", "localhostNodePorts", "syncPeriod", "minSyncPeriod"});
  masquerade_bit(r, ipt, "iptables", &c->iptables.masquerade_bit);
  if (auto v = r.boolean(ipt, "masqueradeAll", "iptables.masqueradeAll")) c->iptables.masquerade_all = *v;
  if (auto v = r.boolean(ipt, "localhostNodePorts", "iptables.localhostNodePorts")) c->iptables.localhost_node_ports = *v;
  duration(r, ipt, "syncPeriod", "iptables.syncPeriod", &c->iptables.sync_period);
  duration(r, ipt, "minSyncPeriod", "iptables.minSyncPeriod", &c->iptables.min_sync_period);
}

void decode_nftables_ipvs(ObjectReader& r, const DocNode* cfg, ProxyConfig* c) {
  if (const DocNode* nft = r.map(cfg, "nftables", "nftables")) {
    r.reject_unknown(*nft, "nftables", {"masqueradeAll", "masqueradeBit", "syncPeriod", "minSyncPeriod"});
    masquerade_bit(r, nft, "nftables", &c->nftables.masquerade_bit);
    if (auto v = r.boolean(nft, "masqueradeAll", "nftables.masqueradeAll")) c->nftables.masquerade_all = *v;
    duration(r, nft, "syncPeriod", "nftables.syncPeriod", &c->nftables.sync_period);
    duration(r, nft, "minSyncPeriod", "nftables.minSyncPeriod", &c->nftables.min_sync_period);
  }
  if (const DocNode* ipvs = r.map(cfg, "ipvs", "ipvs")) {
    r.reject_unknown(*ipvs, "ipvs", {"syncPeriod", "minSyncPeriod", "scheduler", "excludeCIDRs", "strictARP",
                                     "tcpTimeout", "tcpFinTimeout", "udpTimeout"});
    duration(r, ipvs, "syncPeriod", "ipvs.syncPeriod", &c->ipvs.sync_period);
    duration(r, ipvs, "minSyncPeriod", "ipvs.minSyncPeriod", &c->ipvs.min_sync_period);
    if (auto s = r.enumeration(ipvs, "scheduler", "ipvs.scheduler",
                               {"", "rr", "wrr", "lc", "wlc", "lblc", "lblcr", "sh", "dh", "sed", "nq", "mh"},
                               DiagCode::InvalidConfig))
      c->ipvs.scheduler = std::vector<std::string>{"", "rr", "wrr", "lc", "wlc", "lblc", "lblcr", "sh", "dh", "sed", "nq", "mh"}[*s];
    c->ipvs.exclude_cidrs = cidr_list(r, ipvs, "excludeCIDRs", "ipvs.excludeCIDRs");
    if (auto v = r.boolean(ipvs, "strictARP", "ipvs.strictARP")) c->ipvs.strict_arp = *v;
    duration(r, ipvs, "tcpTimeout", "ipvs.tcpTimeout", &c->ipvs.tcp_timeout);
    duration(r, ipvs, "tcpFinTimeout", "ipvs.tcpFinTimeout", &c->ipvs.tcp_fin_timeout);
    duration(r, ipvs, "udpTimeout", "ipvs.udpTimeout", &c->ipvs.udp_timeout);
  }
}

void decode_conntrack(ObjectReader& r, const DocNode* cfg, ProxyConfig* c) {
  const DocNode* ct = r.map(cfg, "conntrack", "conntrack");
  if (!ct) return;
  r.reject_unknown(*ct, "conntrack", {"maxPerCore", "min", "tcpEstablishedTimeout", "tcpCloseWaitTimeout",
                                      "tcpBeLiberal", "udpTimeout", "udpStreamTimeout"});
  if (auto v = r.integer(ct, "maxPerCore", "conntrack.maxPerCore", 0, INT32_MAX, DiagCode::InvalidConfig))
    c->conntrack.max_per_core = static_cast<int32_t>(*v);
  if (auto v = r.integer(ct, "min", "conntrack.min", 0, INT32_MAX, DiagCode::InvalidConfig))
    c->conntrack.min = static_cast<int32_t>(*v);
  duration(r, ct, "tcpEstablishedTimeout", "conntrack.tcpEstablishedTimeout", &c->conntrack.tcp_established_timeout);
  duration(r, ct, "tcpCloseWaitTimeout", "conntrack.tcpCloseWaitTimeout", &c->conntrack.tcp_close_wait_timeout);
  if (auto v = r.boolean(ct, "tcpBeLiberal", "conntrack.tcpBeLiberal")) c->conntrack.tcp_be_liberal = *v;
  duration(r, ct, "udpTimeout", "conntrack.udpTimeout", &c->conntrack.udp_timeout);
  duration(r, ct, "udpStreamTimeout", "conntrack.udpStreamTimeout", &c->conntrack.udp_stream_timeout);
}

void decode_detect_local(ObjectReader& r, const DocNode* cfg, ProxyConfig* c) {
  if (auto m = r.enumeration(cfg, "detectLocalMode", "detectLocalMode",
                             {"", "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix"}, DiagCode::InvalidConfig))
    c->detect_local_mode = *m == 0 ? DetectLocalMode::ClusterCIDR : static_cast<DetectLocalMode>(*m - 1);
  if (const DocNode* dl = r.map(cfg, "detectLocal", "detectLocal")) {
    r.reject_unknown(*dl, "detectLocal", {"bridgeInterface", "interfaceNamePrefix"});
    c->bridge_interface = r.str(dl, "bridgeInterface", "detectLocal.bridgeInterface").value_or("");
    c->interface_name_prefix = r.str(dl, "interfaceNamePrefix", "detectLocal.interfaceNamePrefix").value_or("");
  }
  // Interface names end up in rules (-i NAME): allow only what Linux allows in an ifname.
  for (auto [value, path] : {std::pair{&c->bridge_interface, "detectLocal.bridgeInterface"},
                             std::pair{&c->interface_name_prefix, "detectLocal.interfaceNamePrefix"}}) {
    bool ok = value->size() < 16;
    for (char ch : *value) ok &= ch > 0x20 && ch < 0x7F && ch != '/' && ch != '"' && ch != '\'';
    if (!ok) r.error(DiagCode::InvalidConfig, cfg->key_pos(split(path, '.')[0]), path, "\"" + *value + "\" is not a valid interface name");
  }
  if (c->detect_local_mode == DetectLocalMode::BridgeInterface && c->bridge_interface.empty())
    r.error(DiagCode::InvalidConfig, cfg->key_pos("detectLocalMode"), "detectLocal.bridgeInterface", "required when detectLocalMode is BridgeInterface");
  if (c->detect_local_mode == DetectLocalMode::InterfaceNamePrefix && c->interface_name_prefix.empty())
    r.error(DiagCode::InvalidConfig, cfg->key_pos("detectLocalMode"), "detectLocal.interfaceNamePrefix", "required when detectLocalMode is InterfaceNamePrefix");
}

void decode_cluster_cidr(ObjectReader& r, const DocNode* cfg, ProxyConfig* c) {
  auto s = r.str(cfg, "clusterCIDR", "clusterCIDR");
  if (!s || trim(*s).empty()) return;
  Pos pos = cfg->get("clusterCIDR")->pos;
  auto parts = split(*s, ',');
  for (auto part : parts)
    if (auto cidr = r.cidr_text(trim(part), pos, "clusterCIDR")) c->cluster_cidrs.push_back(*cidr);
  if (parts.size() > 2 || (c->cluster_cidrs.size() == 2 && c->cluster_cidrs[0].family() == c->cluster_cidrs[1].family()))
    r.error(DiagCode::InvalidConfig, pos, "clusterCIDR", "at most one CIDR per IP family (\"IPv4CIDR,IPv6CIDR\")");
}

void decode_node_port_addresses(ObjectReader& r, const DocNode* cfg, ProxyConfig* c) {
  const DocNode* list = r.seq(cfg, "nodePortAddresses", "nodePortAddresses");
  for (size_t i = 0; list && i < list->items.size(); ++i) {
    std::string p = index_path("nodePortAddresses", i);
    auto s = r.as_str(list->items[i], p);
    if (!s) continue;
    if (*s == "primary") {
      if (list->items.size() != 1)
        r.error(DiagCode::InvalidConfig, list->items[i].pos, p, "\"primary\" must be the only entry");
      c->node_port_addresses_primary = true;
      continue;
    }
    if (auto cidr = r.cidr_text(*s, list->items[i].pos, p)) c->node_port_addresses.push_back(*cidr);
  }
}

}  // namespace

bool decode_proxy_config(const DocNode& obj, ProxyConfig* c, DiagSink& diags) {
  ObjectReader r("KubeProxyConfiguration", &c->fields, diags);
  c->present = true;
  c->pos = obj.pos;
  const DocNode* cfg = &obj;
  r.reject_unknown(obj, "", {"apiVersion", "kind", "featureGates", "clientConnection", "logging", "hostnameOverride",
                             "bindAddress", "healthzBindAddress", "metricsBindAddress", "bindAddressHardFail",
                             "enableProfiling", "showHiddenMetricsForVersion", "mode", "iptables", "ipvs", "nftables",
                             "winkernel", "detectLocalMode", "detectLocal", "clusterCIDR", "nodePortAddresses",
                             "oomScoreAdj", "conntrack", "configSyncPeriod", "portRange", "windowsRunAsService",
                             "udpIdleTimeout", "metadata"});
  if (auto m = r.enumeration(cfg, "mode", "mode", {"", "iptables", "ipvs", "nftables", "kernelspace"}, DiagCode::InvalidConfig)) {
    if (*m == 4) r.error(DiagCode::InvalidConfig, cfg->get("mode")->pos, "mode", "\"kernelspace\" is the Windows proxier; kpc compiles Linux modes");
    c->mode = *m <= 1 ? ProxyMode::IPTables : static_cast<ProxyMode>(*m - 1);
  }
  if (auto h = r.str(cfg, "hostnameOverride", "hostnameOverride"); h && !trim(*h).empty()) {
    c->hostname_override = to_lower(trim(*h));  // kube-proxy lower-cases and trims the override
    if (auto err = check_dns1123_subdomain(c->hostname_override))
      r.error(DiagCode::InvalidName, cfg->get("hostnameOverride")->pos, "hostnameOverride", "\"" + *h + "\": " + *err);
  }
  if (auto b = r.str(cfg, "bindAddress", "bindAddress")) c->bind_address = *b;
  if (auto b = r.str(cfg, "healthzBindAddress", "healthzBindAddress")) c->healthz_bind_address = *b;
  if (auto b = r.str(cfg, "metricsBindAddress", "metricsBindAddress")) c->metrics_bind_address = *b;
  if (const DocNode* fg = r.map(cfg, "featureGates", "featureGates"))
    for (size_t i = 0; i < fg->keys.size(); ++i)
      if (auto v = r.boolean(fg, fg->keys[i].name, "featureGates." + fg->keys[i].name)) c->feature_gates[fg->keys[i].name] = *v;
  decode_iptables(r, cfg, c);
  decode_nftables_ipvs(r, cfg, c);
  decode_conntrack(r, cfg, c);
  decode_detect_local(r, cfg, c);
  decode_cluster_cidr(r, cfg, c);
  decode_node_port_addresses(r, cfg, c);
  duration(r, cfg, "configSyncPeriod", "configSyncPeriod", &c->config_sync_period);
  if (auto v = r.integer(cfg, "oomScoreAdj", "oomScoreAdj", -1000, 1000, DiagCode::InvalidConfig))
    c->oom_score_adj = static_cast<int32_t>(*v);
  return r.errors() == 0;
}

bool decode_node_environment(const DocNode& obj, NodeEnvironment* env, DiagSink& diags) {
  ObjectReader r("NodeEnvironment", &env->fields, diags);
  env->present = true;
  env->pos = obj.pos;
  r.reject_unknown(obj, "", {"apiVersion", "kind", "metadata", "hostname", "iptables", "kernel", "interfaces"});
  if (auto h = r.str(&obj, "hostname", "hostname")) {
    env->hostname = to_lower(*h);
    if (auto err = check_dns1123_subdomain(env->hostname))
      r.error(DiagCode::InvalidName, obj.get("hostname")->pos, "hostname", "\"" + *h + "\": " + *err);
  }
  if (const DocNode* ipt = r.map(&obj, "iptables", "iptables")) {
    r.reject_unknown(*ipt, "iptables", {"randomFully", "nfacctCounters"});
    if (auto v = r.boolean(ipt, "randomFully", "iptables.randomFully")) env->random_fully = *v;
    if (auto v = r.boolean(ipt, "nfacctCounters", "iptables.nfacctCounters")) env->nfacct_counters = *v;
  }
  if (const DocNode* k = r.map(&obj, "kernel", "kernel")) {
    r.reject_unknown(*k, "kernel", {"version"});
    if (auto v = r.str(k, "version", "kernel.version")) {
      // A kernel release as /proc/sys/kernel/osrelease has it ("6.1.0-18-amd64"): it decides
      // which sysctls the IPVS back end plans and is printed in its node plan, so only a
      // release that starts with "X.Y" and has no other characters than these is taken.
      bool ok = !v->empty() && v->size() <= 64;
      for (char ch : *v)
        ok &= (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '.' ||
              ch == '-' || ch == '_' || ch == '+' || ch == '~';
      size_t digits = v->find_first_not_of("0123456789");
      ok &= digits != 0 && digits != std::string::npos && (*v)[digits] == '.' && digits + 1 < v->size() &&
            (*v)[digits + 1] >= '0' && (*v)[digits + 1] <= '9';
      if (ok)
        env->kernel_version = *v;
      else
        r.error(DiagCode::InvalidConfig, k->get("version")->pos, "kernel.version",
                "\"" + *v + "\" is not a kernel release (\"X.Y[.Z][-suffix]\" of letters, digits, '.', '-', '_', '+', '~')");
    }
  }
  if (const DocNode* ifs = r.seq(&obj, "interfaces", "interfaces")) {
    env->interfaces_set = true;
    for (size_t i = 0; i < ifs->items.size(); ++i) {
      std::string p = index_path("interfaces", i);
      const DocNode& n = ifs->items[i];
      if (!r.expect_map(n, p)) continue;
      r.reject_unknown(n, p, {"name", "addresses"});
      HostInterface hi;
      hi.name = r.str(&n, "name", join_path(p, "name")).value_or("");
      // The same rule as detectLocal's interface names: what Linux allows in an ifname
      // (IFNAMSIZ, no white space, '/' or quotes), so no text can ride on a host fact.
      bool name_ok = hi.name.size() < 16 && hi.name != "." && hi.name != "..";
      for (char ch : hi.name) name_ok &= ch > 0x20 && ch < 0x7F && ch != '/' && ch != '"' && ch != '\'';
      if (!name_ok)
        r.error(DiagCode::InvalidConfig, n.get("name")->pos, join_path(p, "name"),
                "\"" + hi.name + "\" is not a valid interface name");
      const DocNode* addrs = r.seq(&n, "addresses", join_path(p, "addresses"));
      for (size_t k = 0; addrs && k < addrs->items.size(); ++k) {
        std::string ap = index_path(join_path(p, "addresses"), k);
        if (auto s = r.as_str(addrs->items[k], ap))
          if (auto c = r.cidr_text(*s, addrs->items[k].pos, ap)) hi.addresses.push_back(*c);
      }
      env->interfaces.push_back(std::move(hi));
    }
  }
  return r.errors() == 0;
}

}  // namespace kpc
