#include "tests/support/snapshot_gen.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace kpc::testgen {
namespace {

// ------------------------------------------------------------------ a tiny value tree
// Independent of the code under test: the generator must not use kpc's readers or
// printers, or a bug there would be mirrored into the expected values.
struct V {
  enum Kind { Str, Int, Bool, Seq, Map } kind = Map;
  std::string s;
  int64_t i = 0;
  bool b = false;
  std::vector<std::string> keys;  // Map
  std::vector<V> items;           // Seq items / Map values
  bool flow = false;              // YAML: render inline

  static V str(std::string v) { V n; n.kind = Str; n.s = std::move(v); return n; }
  static V num(int64_t v) { V n; n.kind = Int; n.i = v; return n; }
  static V boolean(bool v) { V n; n.kind = Bool; n.b = v; return n; }
  static V seq() { V n; n.kind = Seq; return n; }
  static V map() { V n; n.kind = Map; return n; }
  V& set(std::string k, V v) { keys.push_back(std::move(k)); items.push_back(std::move(v)); return *this; }
  V& push(V v) { items.push_back(std::move(v)); return *this; }
  V& inline_style(bool f = true) { flow = f; return *this; }
  bool empty_container() const { return (kind == Seq || kind == Map) && items.empty(); }
};

std::string json_escape(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out + "\"";
}

void emit_json(const V& v, std::string& out) {
  switch (v.kind) {
    case V::Str: out += json_escape(v.s); return;
    case V::Int: out += std::to_string(v.i); return;
    case V::Bool: out += v.b ? "true" : "false"; return;
    case V::Seq:
      out += "[";
      for (size_t k = 0; k < v.items.size(); ++k) {
        if (k) out += ", ";
        emit_json(v.items[k], out);
      }
      out += "]";
      return;
    case V::Map:
      out += "{";
      for (size_t k = 0; k < v.items.size(); ++k) {
        if (k) out += ", ";
        out += json_escape(v.keys[k]) + ": ";
        emit_json(v.items[k], out);
      }
      out += "}";
      return;
  }
}

bool lower_is(const std::string& s, std::initializer_list<const char*> words) {
  std::string l = s;
  for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : words)
    if (l == w) return true;
  return false;
}

// Whether a string may be written as a YAML plain scalar and still read back as a
// string under YAML 1.1 typing. Conservative: anything number-like or boolean-like is quoted.
bool yaml_plain_ok(const std::string& s, bool in_flow) {
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '/' ||
              (c == ':' && !in_flow);
    if (!ok) return false;
  }
  if (lower_is(s, {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "none"})) return false;
  bool numberish = true;
  size_t dots = 0, digits = 0;
  for (char c : s) {
    if (c == '.') ++dots;
    else if (c >= '0' && c <= '9') ++digits;
    else if (!(c == '+' || c == '-' || c == 'e' || c == 'E' || c == '_' || c == 'x' || c == 'o' || c == 'b'))
      numberish = false;
  }
  if (numberish && !(dots >= 2 && digits == s.size() - dots)) return false;  // "6.1", "1e3", "0x1": quote
  return true;
}

std::string yaml_scalar(const V& v, bool in_flow) {
  switch (v.kind) {
    case V::Str: return yaml_plain_ok(v.s, in_flow) ? v.s : json_escape(v.s);
    case V::Int: return std::to_string(v.i);
    case V::Bool: return v.b ? "true" : "false";
    default: return "?";
  }
}

void emit_yaml_inline(const V& v, std::string& out) {
  if (v.kind == V::Seq) {
    out += "[";
    for (size_t k = 0; k < v.items.size(); ++k) {
      if (k) out += ", ";
      emit_yaml_inline(v.items[k], out);
    }
    out += "]";
  } else if (v.kind == V::Map) {
    out += "{";
    for (size_t k = 0; k < v.items.size(); ++k) {
      if (k) out += ", ";
      out += v.keys[k] + ": ";
      emit_yaml_inline(v.items[k], out);
    }
    out += "}";
  } else {
    out += yaml_scalar(v, true);
  }
}

// Renders a non-empty block Map/Seq as lines, each at column 0.
std::vector<std::string> yaml_block_lines(const V& v);

// Appends the lines of `key: value` (for Map) with the value rendered as needed.
void yaml_entry_lines(const std::string& head, const V& val, bool seq_indentless, std::vector<std::string>& lines) {
  if (val.kind != V::Seq && val.kind != V::Map) {
    lines.push_back(head + " " + yaml_scalar(val, false));
    return;
  }
  if (val.flow || val.empty_container()) {
    std::string s;
    emit_yaml_inline(val, s);
    lines.push_back(head + " " + s);
    return;
  }
  lines.push_back(head);
  std::string pad = (val.kind == V::Seq && seq_indentless) ? "" : "  ";
  for (const auto& l : yaml_block_lines(val)) lines.push_back(pad + l);
}

std::vector<std::string> yaml_block_lines(const V& v) {
  std::vector<std::string> lines;
  if (v.kind == V::Map) {
    for (size_t k = 0; k < v.items.size(); ++k) yaml_entry_lines(v.keys[k] + ":", v.items[k], true, lines);
    return lines;
  }
  for (const auto& item : v.items) {
    if ((item.kind == V::Seq || item.kind == V::Map) && !item.flow && !item.empty_container()) {
      auto sub = yaml_block_lines(item);
      for (size_t k = 0; k < sub.size(); ++k) lines.push_back((k == 0 ? "- " : "  ") + sub[k]);
    } else if (item.kind == V::Seq || item.kind == V::Map) {
      std::string s;
      emit_yaml_inline(item, s);
      lines.push_back("- " + s);
    } else {
      lines.push_back("- " + yaml_scalar(item, false));
    }
  }
  return lines;
}

std::string emit_yaml(const V& v) {
  std::string out;
  for (const auto& l : yaml_block_lines(v)) out += l + "\n";
  return out;
}

// ------------------------------------------------------------------ objects -> values
V str_list(const std::vector<std::string>& xs, bool flow) {
  V s = V::seq();
  for (const auto& x : xs) s.push(V::str(x));
  return s.inline_style(flow);
}

V labels_map(const std::map<std::string, std::string>& labels) {
  V m = V::map();
  for (const auto& [k, v] : labels) m.set(k, V::str(v));
  return m;
}

V service_value(const GenService& s, bool flow) {
  V meta = V::map();
  meta.set("name", V::str(s.name)).set("namespace", V::str(s.ns));
  if (!s.labels.empty()) meta.set("labels", labels_map(s.labels));
  meta.inline_style(flow && s.labels.empty());

  V spec = V::map();
  if (!s.type.empty()) spec.set("type", V::str(s.type));
  if (s.headless) {
    spec.set("clusterIP", V::str("None"));
  } else if (!s.cluster_ips.empty()) {
    spec.set("clusterIP", V::str(s.cluster_ips[0]));
    if (s.write_cluster_ips) spec.set("clusterIPs", str_list(s.cluster_ips, flow));
  }
  if (!s.ip_families.empty()) spec.set("ipFamilies", str_list(s.ip_families, flow));
  if (!s.ip_family_policy.empty()) spec.set("ipFamilyPolicy", V::str(s.ip_family_policy));
  if (!s.ports.empty()) {
    V ports = V::seq();
    for (const auto& p : s.ports) {
      V pm = V::map();
      if (!p.name.empty()) pm.set("name", V::str(p.name));
      if (!p.protocol.empty()) pm.set("protocol", V::str(p.protocol));
      pm.set("port", V::num(p.port));
      if (p.target_port) pm.set("targetPort", V::num(p.target_port));
      if (!p.target_port_name.empty()) pm.set("targetPort", V::str(p.target_port_name));
      if (p.node_port) pm.set("nodePort", V::num(p.node_port));
      if (!p.app_protocol.empty()) pm.set("appProtocol", V::str(p.app_protocol));
      ports.push(pm.inline_style(flow));
    }
    spec.set("ports", ports);
  }
  if (!s.external_ips.empty()) spec.set("externalIPs", str_list(s.external_ips, flow));
  if (!s.external_traffic_policy.empty()) spec.set("externalTrafficPolicy", V::str(s.external_traffic_policy));
  if (!s.internal_traffic_policy.empty()) spec.set("internalTrafficPolicy", V::str(s.internal_traffic_policy));
  if (s.health_check_node_port) spec.set("healthCheckNodePort", V::num(s.health_check_node_port));
  if (s.client_ip_affinity) {
    spec.set("sessionAffinity", V::str("ClientIP"));
    if (s.affinity_timeout) {
      V cip = V::map();
      cip.set("timeoutSeconds", V::num(s.affinity_timeout));
      V sac = V::map();
      sac.set("clientIP", cip);
      spec.set("sessionAffinityConfig", sac);
    }
  }
  if (!s.lb_source_ranges.empty()) spec.set("loadBalancerSourceRanges", str_list(s.lb_source_ranges, flow));
  if (!s.external_name.empty()) spec.set("externalName", V::str(s.external_name));

  V obj = V::map();
  obj.set("apiVersion", V::str("v1")).set("kind", V::str("Service")).set("metadata", meta).set("spec", spec);
  if (!s.lb_ingress_ips.empty()) {
    V ing = V::seq();
    for (const auto& ip : s.lb_ingress_ips) {
      V m = V::map();
      m.set("ip", V::str(ip));
      ing.push(m.inline_style(flow));
    }
    V lb = V::map();
    lb.set("ingress", ing);
    V status = V::map();
    status.set("loadBalancer", lb);
    obj.set("status", status);
  }
  return obj;
}

V slice_value(const GenSlice& s, bool flow) {
  V labels = V::map();
  labels.set("kubernetes.io/service-name", V::str(s.service_name));
  V meta = V::map();
  meta.set("name", V::str(s.name)).set("namespace", V::str(s.ns)).set("labels", labels);
  V eps = V::seq();
  for (const auto& e : s.endpoints) {
    V em = V::map();
    em.set("addresses", str_list(e.addresses, flow));
    V cond = V::map();
    if (e.ready) cond.set("ready", V::boolean(*e.ready));
    if (e.serving) cond.set("serving", V::boolean(*e.serving));
    if (e.terminating) cond.set("terminating", V::boolean(*e.terminating));
    em.set("conditions", cond.inline_style(flow));
    if (!e.node_name.empty()) em.set("nodeName", V::str(e.node_name));
    if (!e.zone.empty()) em.set("zone", V::str(e.zone));
    eps.push(em);
  }
  V ports = V::seq();
  for (const auto& p : s.ports) {
    V pm = V::map();
    pm.set("name", V::str(p.name)).set("protocol", V::str(p.protocol)).set("port", V::num(p.port));
    ports.push(pm.inline_style(flow));
  }
  V obj = V::map();
  obj.set("apiVersion", V::str("discovery.k8s.io/v1"))
      .set("kind", V::str("EndpointSlice"))
      .set("metadata", meta)
      .set("addressType", V::str(s.address_type))
      .set("endpoints", eps)
      .set("ports", ports);
  return obj;
}

V node_value(const GenNode& n, bool flow) {
  V meta = V::map();
  meta.set("name", V::str(n.name));
  V labels = V::map();
  labels.set("kubernetes.io/hostname", V::str(n.name));
  if (!n.zone.empty()) labels.set("topology.kubernetes.io/zone", V::str(n.zone));
  meta.set("labels", labels);
  V spec = V::map();
  if (!n.pod_cidrs.empty()) {
    spec.set("podCIDR", V::str(n.pod_cidrs[0]));
    spec.set("podCIDRs", str_list(n.pod_cidrs, flow));
  }
  V addrs = V::seq();
  for (const auto& ip : n.internal_ips) {
    V a = V::map();
    a.set("type", V::str("InternalIP")).set("address", V::str(ip));
    addrs.push(a.inline_style(flow));
  }
  V h = V::map();
  h.set("type", V::str("Hostname")).set("address", V::str(n.name));
  addrs.push(h.inline_style(flow));
  V status = V::map();
  status.set("addresses", addrs);
  V obj = V::map();
  obj.set("apiVersion", V::str("v1")).set("kind", V::str("Node")).set("metadata", meta);
  if (!spec.items.empty()) obj.set("spec", spec);
  obj.set("status", status);
  return obj;
}

V config_value(const GenProxyConfig& c) {
  V obj = V::map();
  obj.set("apiVersion", V::str("kubeproxy.config.k8s.io/v1alpha1")).set("kind", V::str("KubeProxyConfiguration"));
  if (!c.mode.empty()) obj.set("mode", V::str(c.mode));
  if (!c.hostname_override.empty()) obj.set("hostnameOverride", V::str(c.hostname_override));
  if (!c.cluster_cidrs.empty()) {
    std::string joined;
    for (const auto& x : c.cluster_cidrs) joined += (joined.empty() ? "" : ",") + x;
    obj.set("clusterCIDR", V::str(joined));
  }
  if (!c.feature_gates.empty()) {
    V fg = V::map();
    for (const auto& [k, v] : c.feature_gates) fg.set(k, V::boolean(v));
    obj.set("featureGates", fg);
  }
  V ipt = V::map();
  if (c.write_masquerade_bit) ipt.set("masqueradeBit", V::num(c.masquerade_bit));
  if (c.masquerade_all) ipt.set("masqueradeAll", V::boolean(*c.masquerade_all));
  if (c.localhost_node_ports) ipt.set("localhostNodePorts", V::boolean(*c.localhost_node_ports));
  if (!c.sync_period.empty()) ipt.set("syncPeriod", V::str(c.sync_period));
  if (!c.min_sync_period.empty()) ipt.set("minSyncPeriod", V::str(c.min_sync_period));
  if (!ipt.items.empty()) obj.set("iptables", ipt);
  if (!c.detect_local_mode.empty()) obj.set("detectLocalMode", V::str(c.detect_local_mode));
  V ct = V::map();
  if (c.conntrack_max_per_core) ct.set("maxPerCore", V::num(*c.conntrack_max_per_core));
  if (c.tcp_be_liberal) ct.set("tcpBeLiberal", V::boolean(*c.tcp_be_liberal));
  if (!ct.items.empty()) obj.set("conntrack", ct);
  return obj;
}

std::vector<V> all_values(const GeneratedCluster& c, bool flow) {
  std::vector<V> out;
  for (const auto& s : c.services) out.push_back(service_value(s, flow));
  for (const auto& s : c.slices) out.push_back(slice_value(s, flow));
  for (const auto& n : c.nodes) out.push_back(node_value(n, flow));
  if (c.config) out.push_back(config_value(*c.config));
  return out;
}

// ------------------------------------------------------------------ generation
std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%x", v);
  return buf;
}

template <typename T>
T pick(const std::vector<T>& xs) {
  return *rc::gen::elementOf(xs);
}
int range(int lo, int hi_exclusive) { return *rc::gen::inRange(lo, hi_exclusive); }
bool coin() { return *rc::gen::arbitrary<bool>(); }
bool chance(int one_in) { return range(0, one_in) == 0; }
std::optional<bool> maybe_bool() {
  int v = range(0, 3);
  return v == 0 ? std::nullopt : std::optional<bool>(v == 1);
}

GeneratedCluster generate(const GenOptions& o) {
  GeneratedCluster c;
  unsigned next_v4 = 1, next_v6 = 1, next_node_port = 30000, next_slice = 0, next_ep = 1;

  // Nodes.
  int nnodes = range(0, static_cast<int>(o.max_nodes) + 1);
  for (int i = 0; i < nnodes; ++i) {
    GenNode n;
    n.name = "node-" + std::to_string(i);
    n.zone = pick<std::string>({"", "zone-a", "zone-b"});
    n.pod_cidrs.push_back("10.244." + std::to_string(i) + ".0/24");
    n.internal_ips.push_back("192.168.0." + std::to_string(10 + i));
    if (o.allow_ipv6 && coin()) {
      n.pod_cidrs.push_back(i == 0 ? "fd00:10:244::/64" : "fd00:10:244:" + hex(static_cast<unsigned>(i)) + "::/64");
      n.internal_ips.push_back("2001:db8::" + hex(static_cast<unsigned>(10 + i)));
    }
    c.nodes.push_back(std::move(n));
  }

  // Services.
  const std::vector<std::string> namespaces = {"default", "shop", "kube-system", "team-1"};
  const std::vector<std::string> prefixes = {"web", "api", "db", "cache", "dns", "svc"};
  const std::vector<std::string> port_names = {"http", "https", "grpc", "metrics", "dns", "dns-tcp", "admin"};
  const std::vector<std::string> target_names = {"web", "http-alt", "metrics", "tcp8080"};
  int nsvc = range(0, static_cast<int>(o.max_services) + 1);
  for (int i = 0; i < nsvc; ++i) {
    GenService s;
    s.ns = pick(namespaces);
    s.name = pick(prefixes) + "-" + std::to_string(i);
    s.type = pick<std::string>({"", "ClusterIP", "NodePort", "LoadBalancer", "ExternalName"});
    if (chance(3)) s.labels["app"] = s.name;
    bool node_ports = s.type == "NodePort" || s.type == "LoadBalancer";
    bool external_name = s.type == "ExternalName";

    if (external_name) {
      s.external_name = pick<std::string>({"example.com", "db.example.org", "payments.shop.svc.cluster.local"});
    } else if (s.is_type("ClusterIP") && chance(5)) {
      s.headless = true;
    } else {
      // 0: IPv4, 1: IPv6, 2: dual v4 first, 3: dual v6 first.
      int fam = o.allow_ipv6 ? range(0, 4) : 0;
      std::string v4 = "10.96." + std::to_string(next_v4 / 250) + "." + std::to_string(next_v4 % 250 + 1);
      std::string v6 = "fd00:10:96::" + hex(next_v6);
      if (fam == 0 || fam == 2 || fam == 3) ++next_v4;
      if (fam != 0) ++next_v6;
      if (fam == 0) s.cluster_ips = {v4};
      if (fam == 1) s.cluster_ips = {v6};
      if (fam == 2) s.cluster_ips = {v4, v6};
      if (fam == 3) s.cluster_ips = {v6, v4};
      bool dual = fam >= 2;
      s.write_cluster_ips = dual || coin();
      if (dual || coin())
        for (const auto& ip : s.cluster_ips) s.ip_families.push_back(ip.find(':') != std::string::npos ? "IPv6" : "IPv4");
      s.ip_family_policy = dual ? pick<std::string>({"PreferDualStack", "RequireDualStack"})
                                : pick<std::string>({"", "SingleStack", "PreferDualStack"});
    }

    // Ports (1-3; headless and ExternalName may have none).
    int nports = (s.headless || external_name) ? range(0, 4) : range(1, 4);
    int first = range(1, 65000), step = range(1, 100);
    size_t name_off = static_cast<size_t>(range(0, static_cast<int>(port_names.size())));
    for (int k = 0; k < nports; ++k) {
      GenServicePort p;
      p.port = first + k * step;
      p.protocol = pick<std::string>({"", "TCP", "UDP", "SCTP"});
      if (nports > 1 || coin()) p.name = port_names[(name_off + static_cast<size_t>(k)) % port_names.size()];
      switch (range(0, 3)) {
        case 0: break;
        case 1: p.target_port = range(1, 65536); break;
        default: p.target_port_name = pick(target_names); break;
      }
      if (node_ports) p.node_port = static_cast<int>(next_node_port++);
      if (chance(4)) p.app_protocol = "http";
      s.ports.push_back(std::move(p));
    }

    if (!s.headless && !external_name && chance(4))
      for (int k = range(1, 3); k > 0; --k) s.external_ips.push_back("203.0.113." + std::to_string(range(1, 255)));
    if (node_ports || !s.external_ips.empty()) s.external_traffic_policy = pick<std::string>({"", "Cluster", "Local"});
    if (s.type == "LoadBalancer" && s.external_traffic_policy == "Local" && coin())
      s.health_check_node_port = static_cast<int>(next_node_port++);
    s.internal_traffic_policy = pick<std::string>({"", "Cluster", "Local"});
    if (chance(4)) {
      s.client_ip_affinity = true;
      if (coin()) s.affinity_timeout = range(1, 86401);
    }
    if (s.type == "LoadBalancer") {
      if (coin()) s.lb_source_ranges = {"203.0.113.0/24"};
      if (coin()) s.lb_source_ranges.push_back("10.0.0.0/8");
      if (coin()) s.lb_ingress_ips = {"198.51.100." + std::to_string(i + 1)};
    }

    // EndpointSlices for it.
    if (!external_name) {
      int nslices = range(0, static_cast<int>(o.max_slices_per_service) + 1);
      for (int j = 0; j < nslices; ++j) {
        GenSlice sl;
        sl.ns = s.ns;
        sl.name = s.name + "-" + std::to_string(next_slice++);
        sl.service_name = s.name;
        if (s.cluster_ips.empty()) sl.address_type = "IPv4";
        else sl.address_type = s.cluster_ips[static_cast<size_t>(j) % s.cluster_ips.size()].find(':') != std::string::npos ? "IPv6" : "IPv4";
        int neps = range(0, static_cast<int>(o.max_endpoints_per_slice) + 1);
        for (int e = 0; e < neps; ++e) {
          GenEndpoint ep;
          unsigned n = next_ep++;
          ep.addresses.push_back(sl.address_type == "IPv4"
                                     ? "10.244." + std::to_string(n / 250) + "." + std::to_string(n % 250 + 1)
                                     : "fd00:10:244::" + hex(n));
          ep.ready = maybe_bool();
          ep.serving = maybe_bool();
          ep.terminating = maybe_bool();
          if (!c.nodes.empty() && coin()) ep.node_name = pick(c.nodes).name;
          ep.zone = pick<std::string>({"", "zone-a", "zone-b"});
          sl.endpoints.push_back(std::move(ep));
        }
        for (const auto& p : s.ports)
          sl.ports.push_back(GenSlicePort{p.name, p.protocol.empty() ? "TCP" : p.protocol,
                                          p.target_port ? p.target_port : range(1, 65536)});
        c.slices.push_back(std::move(sl));
      }
    }
    c.services.push_back(std::move(s));
  }

  // KubeProxyConfiguration.
  if (o.allow_config && coin()) {
    GenProxyConfig k;
    k.mode = pick<std::string>({"", "iptables", "ipvs", "nftables"});
    if (!c.nodes.empty() && coin()) k.hostname_override = pick(c.nodes).name;
    int cidrs = range(0, o.allow_ipv6 ? 3 : 2);
    if (cidrs >= 1) k.cluster_cidrs.push_back("10.244.0.0/16");
    if (cidrs >= 2) k.cluster_cidrs.push_back("fd00:10:244::/56");
    if ((k.write_masquerade_bit = coin())) k.masquerade_bit = range(0, 32);
    k.masquerade_all = maybe_bool();
    k.localhost_node_ports = maybe_bool();
    static const std::vector<std::pair<std::string, int64_t>> syncs = {
        {"", 0}, {"30s", 30'000'000'000}, {"1m0s", 60'000'000'000}, {"15s", 15'000'000'000},
        {"1m30s", 90'000'000'000}, {"500ms", 500'000'000}, {"2h45m", 9'900'000'000'000}};
    static const std::vector<std::pair<std::string, int64_t>> mins = {
        {"", 0}, {"1s", 1'000'000'000}, {"0s", 0}, {"10s", 10'000'000'000}, {"250ms", 250'000'000}};
    auto sp = pick(syncs);
    k.sync_period = sp.first, k.sync_period_ns = sp.second;
    auto mp = pick(mins);
    k.min_sync_period = mp.first, k.min_sync_period_ns = mp.second;
    k.detect_local_mode = pick<std::string>({"", "ClusterCIDR", "NodeCIDR"});
    if (coin()) k.conntrack_max_per_core = range(0, 100000);
    k.tcp_be_liberal = maybe_bool();
    if (chance(3)) k.feature_gates["NFTablesProxyMode"] = coin();
    c.config = std::move(k);
  }
  return c;
}

}  // namespace

// ------------------------------------------------------------------ rendering
std::vector<std::string> GeneratedCluster::yaml_documents() const {
  std::vector<std::string> out;
  bool flow = (services.size() + slices.size()) % 2 == 1;  // deterministic mix of block and flow styles
  for (const auto& v : all_values(*this, flow)) out.push_back(emit_yaml(v));
  return out;
}

std::string GeneratedCluster::to_yaml() const {
  std::string out;
  for (const auto& d : yaml_documents()) out += "---\n" + d;
  return out;
}

std::vector<std::string> GeneratedCluster::json_objects() const {
  std::vector<std::string> out;
  for (const auto& v : all_values(*this, false)) {
    std::string s;
    emit_json(v, s);
    out.push_back(std::move(s));
  }
  return out;
}

std::string GeneratedCluster::to_json_list() const {
  std::string out = "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [";
  auto objs = json_objects();
  for (size_t k = 0; k < objs.size(); ++k) out += (k ? ",\n  " : "\n  ") + objs[k];
  return out + "\n]}\n";
}

std::string GeneratedCluster::to_yaml_list() const {
  V list = V::map();
  V items = V::seq();
  for (auto& v : all_values(*this, false)) items.push(std::move(v));
  list.set("apiVersion", V::str("v1")).set("kind", V::str("List")).set("items", items);
  return emit_yaml(list);
}

rc::Gen<GeneratedCluster> gen_cluster(GenOptions opts) {
  return rc::gen::exec([opts] { return generate(opts); });
}

GeneratedCluster sample_cluster(uint64_t seed, int size, GenOptions opts) {
  return gen_cluster(opts)(rc::Random(seed), size).value();
}

// ------------------------------------------------------------------ model dump
namespace {

const char* opt_bool(const std::optional<bool>& b) { return !b ? "-" : *b ? "true" : "false"; }

std::string ips(const std::vector<IPAddr>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : ",") + x.str();
  return out;
}

std::string cidrs(const std::vector<CIDR>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : ",") + x.str();
  return out;
}

std::string labels(const std::map<std::string, std::string>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += k + "=" + v + ";";
  return out;
}

}  // namespace

std::string dump_model(const Snapshot& s) {
  std::ostringstream o;
  for (const auto& sv : s.services) {
    o << "Service " << sv.meta.key() << " labels=" << labels(sv.meta.labels)
      << " type=" << (sv.type ? static_cast<int>(*sv.type) : -1) << " headless=" << sv.headless
      << " ips=" << ips(sv.cluster_ips) << " families=";
    for (auto f : sv.ip_families) o << family_name(f) << ",";
    o << " policy=" << (sv.ip_family_policy ? static_cast<int>(*sv.ip_family_policy) : -1)
      << " eips=" << ips(sv.external_ips) << " lbranges=" << cidrs(sv.load_balancer_source_ranges)
      << " etp=" << (sv.external_traffic_policy ? static_cast<int>(*sv.external_traffic_policy) : -1)
      << " itp=" << (sv.internal_traffic_policy ? static_cast<int>(*sv.internal_traffic_policy) : -1)
      << " hcnp=" << sv.health_check_node_port << " affinity=" << static_cast<int>(sv.session_affinity) << "/"
      << sv.affinity_timeout_seconds << " extname=" << sv.external_name << " td=" << sv.traffic_distribution << "\n";
    for (const auto& p : sv.ports)
      o << "  port " << p.name << " " << protocol_name(p.protocol) << " " << p.port << " -> " << p.target_port << "/"
        << p.target_port_name << " np=" << p.node_port << " ap=" << p.app_protocol << "\n";
    for (const auto& i : sv.load_balancer_ingress)
      o << "  ingress " << (i.ip ? i.ip->str() : "-") << " " << i.hostname << " "
        << (i.ip_mode ? static_cast<int>(*i.ip_mode) : -1) << "\n";
  }
  for (const auto& sl : s.slices) {
    o << "EndpointSlice " << sl.meta.key() << " labels=" << labels(sl.meta.labels)
      << " at=" << static_cast<int>(sl.address_type) << "\n";
    for (const auto& e : sl.endpoints)
      o << "  ep " << ips(e.addresses) << " r=" << opt_bool(e.ready) << " s=" << opt_bool(e.serving)
        << " t=" << opt_bool(e.terminating) << " node=" << e.node_name.value_or("-") << " zone=" << e.zone.value_or("-")
        << "\n";
    for (const auto& p : sl.ports)
      o << "  port " << p.name.value_or("<nil>") << " " << (p.protocol ? protocol_name(*p.protocol) : "-") << " "
        << (p.port ? std::to_string(*p.port) : "-") << "\n";
  }
  for (const auto& n : s.nodes) {
    o << "Node " << n.meta.key() << " labels=" << labels(n.meta.labels) << " podcidrs=" << cidrs(n.pod_cidrs) << "\n";
    for (const auto& a : n.addresses) o << "  addr " << a.type << " " << a.address << "\n";
  }
  const auto& c = s.config;
  o << "config present=" << c.present << " mode=" << static_cast<int>(c.mode) << " host=" << c.hostname_override
    << " cidrs=" << cidrs(c.cluster_cidrs) << " mb=" << c.iptables.masquerade_bit << " ma=" << c.iptables.masquerade_all
    << " lnp=" << c.iptables.localhost_node_ports << " sync=" << c.iptables.sync_period.ns << "/"
    << c.iptables.min_sync_period.ns << " dl=" << static_cast<int>(c.detect_local_mode)
    << " ctmax=" << (c.conntrack.max_per_core ? *c.conntrack.max_per_core : -1)
    << " liberal=" << c.conntrack.tcp_be_liberal << " gates=";
  for (const auto& [k, v] : c.feature_gates) o << k << "=" << v << ";";
  o << "\n";
  o << "env present=" << s.env.present << " host=" << s.env.hostname << " rf=" << s.env.random_fully
    << " nfacct=" << s.env.nfacct_counters << " kernel=" << s.env.kernel_version << " ifs=" << s.env.interfaces.size()
    << "\n";
  for (const auto& [k, n] : s.skipped_kinds) o << "skipped " << k << "=" << n << "\n";
  return o.str();
}

// ------------------------------------------------------------------ model comparison
namespace {

template <typename T>
const T* find_by_key(const std::vector<T>& objs, const std::string& key) {
  for (const auto& o : objs)
    if (o.meta.key() == key) return &o;
  return nullptr;
}

std::string join_ips(const std::vector<IPAddr>& xs) { return ips(xs); }

std::string strs(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : ",") + x;
  return out;
}

int protocol_index(const std::string& p) { return p == "UDP" ? 1 : p == "SCTP" ? 2 : 0; }

#define KPC_EXPECT_SAME(what, want, got)                                                     \
  do {                                                                                       \
    std::ostringstream w_, g_;                                                               \
    w_ << (want);                                                                            \
    g_ << (got);                                                                             \
    if (w_.str() != g_.str()) return what + std::string(": generated ") + w_.str() + ", loaded " + g_.str(); \
  } while (0)

std::string service_mismatch(const GenService& g, const Service& s) {
  std::string at = "Service " + g.key();
  static const std::vector<std::string> types = {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"};
  int want_type = -1;
  for (size_t i = 0; i < types.size(); ++i)
    if (g.type == types[i]) want_type = static_cast<int>(i);
  KPC_EXPECT_SAME(at + " type", want_type, s.type ? static_cast<int>(*s.type) : -1);
  KPC_EXPECT_SAME(at + " headless", g.headless, s.headless);
  KPC_EXPECT_SAME(at + " clusterIPs", strs(g.cluster_ips), join_ips(s.cluster_ips));
  std::string fams;
  for (auto f : s.ip_families) fams += std::string(fams.empty() ? "" : ",") + family_name(f);
  KPC_EXPECT_SAME(at + " ipFamilies", strs(g.ip_families), fams);
  static const std::vector<std::string> policies = {"SingleStack", "PreferDualStack", "RequireDualStack"};
  int want_policy = -1;
  for (size_t i = 0; i < policies.size(); ++i)
    if (g.ip_family_policy == policies[i]) want_policy = static_cast<int>(i);
  KPC_EXPECT_SAME(at + " ipFamilyPolicy", want_policy, s.ip_family_policy ? static_cast<int>(*s.ip_family_policy) : -1);
  KPC_EXPECT_SAME(at + " ports", g.ports.size(), s.ports.size());
  for (size_t i = 0; i < g.ports.size(); ++i) {
    const auto& gp = g.ports[i];
    const auto& sp = s.ports[i];
    std::string pat = at + " ports[" + std::to_string(i) + "]";
    KPC_EXPECT_SAME(pat + ".name", gp.name, sp.name);
    KPC_EXPECT_SAME(pat + ".protocol", protocol_index(gp.protocol), static_cast<int>(sp.protocol));
    KPC_EXPECT_SAME(pat + ".port", gp.port, sp.port);
    KPC_EXPECT_SAME(pat + ".targetPort", gp.target_port, sp.target_port);
    KPC_EXPECT_SAME(pat + ".targetPort(name)", gp.target_port_name, sp.target_port_name);
    KPC_EXPECT_SAME(pat + ".nodePort", gp.node_port, sp.node_port);
    KPC_EXPECT_SAME(pat + ".appProtocol", gp.app_protocol, sp.app_protocol);
  }
  KPC_EXPECT_SAME(at + " externalIPs", strs(g.external_ips), join_ips(s.external_ips));
  KPC_EXPECT_SAME(at + " externalTrafficPolicy", g.external_traffic_policy.empty() ? -1 : g.external_traffic_policy == "Local",
                  s.external_traffic_policy ? static_cast<int>(*s.external_traffic_policy) : -1);
  KPC_EXPECT_SAME(at + " internalTrafficPolicy", g.internal_traffic_policy.empty() ? -1 : g.internal_traffic_policy == "Local",
                  s.internal_traffic_policy ? static_cast<int>(*s.internal_traffic_policy) : -1);
  KPC_EXPECT_SAME(at + " healthCheckNodePort", g.health_check_node_port, s.health_check_node_port);
  KPC_EXPECT_SAME(at + " sessionAffinity", g.client_ip_affinity, s.session_affinity == SessionAffinity::ClientIP);
  KPC_EXPECT_SAME(at + " timeoutSeconds", g.affinity_timeout ? g.affinity_timeout : 10800, s.affinity_timeout_seconds);
  KPC_EXPECT_SAME(at + " loadBalancerSourceRanges", strs(g.lb_source_ranges), cidrs(s.load_balancer_source_ranges));
  std::string ingress;
  for (const auto& i : s.load_balancer_ingress) ingress += (ingress.empty() ? "" : ",") + (i.ip ? i.ip->str() : "-");
  KPC_EXPECT_SAME(at + " ingress", strs(g.lb_ingress_ips), ingress);
  KPC_EXPECT_SAME(at + " externalName", g.external_name, s.external_name);
  KPC_EXPECT_SAME(at + " labels", labels(g.labels), labels(s.meta.labels));
  return "";
}

std::string slice_mismatch(const GenSlice& g, const EndpointSlice& s) {
  std::string at = "EndpointSlice " + g.key();
  KPC_EXPECT_SAME(at + " service", g.service_name, s.service_name());
  KPC_EXPECT_SAME(at + " addressType", g.address_type == "IPv6" ? 1 : 0, static_cast<int>(s.address_type));
  KPC_EXPECT_SAME(at + " endpoints", g.endpoints.size(), s.endpoints.size());
  for (size_t i = 0; i < g.endpoints.size(); ++i) {
    const auto& ge = g.endpoints[i];
    const auto& se = s.endpoints[i];
    std::string eat = at + " endpoints[" + std::to_string(i) + "]";
    KPC_EXPECT_SAME(eat + ".addresses", strs(ge.addresses), join_ips(se.addresses));
    KPC_EXPECT_SAME(eat + ".ready", opt_bool(ge.ready), opt_bool(se.ready));
    KPC_EXPECT_SAME(eat + ".serving", opt_bool(ge.serving), opt_bool(se.serving));
    KPC_EXPECT_SAME(eat + ".terminating", opt_bool(ge.terminating), opt_bool(se.terminating));
    KPC_EXPECT_SAME(eat + ".nodeName", ge.node_name, se.node_name.value_or(""));
    KPC_EXPECT_SAME(eat + ".zone", ge.zone, se.zone.value_or(""));
  }
  KPC_EXPECT_SAME(at + " ports", g.ports.size(), s.ports.size());
  for (size_t i = 0; i < g.ports.size(); ++i) {
    std::string pat = at + " ports[" + std::to_string(i) + "]";
    KPC_EXPECT_SAME(pat + ".name", g.ports[i].name, s.ports[i].name.value_or("<nil>"));
    KPC_EXPECT_SAME(pat + ".protocol", protocol_index(g.ports[i].protocol), s.ports[i].protocol ? static_cast<int>(*s.ports[i].protocol) : -1);
    KPC_EXPECT_SAME(pat + ".port", g.ports[i].port, s.ports[i].port.value_or(-1));
  }
  return "";
}

std::string node_mismatch(const GenNode& g, const Node& n) {
  std::string at = "Node " + g.name;
  KPC_EXPECT_SAME(at + " podCIDRs", strs(g.pod_cidrs), cidrs(n.pod_cidrs));
  std::string ips4 = n.node_ip(IPFamily::V4) ? n.node_ip(IPFamily::V4)->str() : "-";
  KPC_EXPECT_SAME(at + " IPv4", g.internal_ips.empty() ? "-" : g.internal_ips[0], ips4);
  std::string ips6 = n.node_ip(IPFamily::V6) ? n.node_ip(IPFamily::V6)->str() : "-";
  KPC_EXPECT_SAME(at + " IPv6", g.internal_ips.size() > 1 ? g.internal_ips[1] : "-", ips6);
  auto zone = n.meta.labels.find("topology.kubernetes.io/zone");
  KPC_EXPECT_SAME(at + " zone", g.zone, zone == n.meta.labels.end() ? "" : zone->second);
  return "";
}

std::string config_mismatch(const std::optional<GenProxyConfig>& g, const ProxyConfig& c) {
  KPC_EXPECT_SAME(std::string("KubeProxyConfiguration present"), g.has_value(), c.present);
  if (!g) return "";
  std::string at = "KubeProxyConfiguration";
  int mode = g->mode == "ipvs" ? 1 : g->mode == "nftables" ? 2 : 0;
  KPC_EXPECT_SAME(at + " mode", mode, static_cast<int>(c.mode));
  KPC_EXPECT_SAME(at + " hostnameOverride", g->hostname_override, c.hostname_override);
  KPC_EXPECT_SAME(at + " clusterCIDR", strs(g->cluster_cidrs), cidrs(c.cluster_cidrs));
  KPC_EXPECT_SAME(at + " masqueradeBit", g->write_masquerade_bit ? g->masquerade_bit : 14, c.iptables.masquerade_bit);
  KPC_EXPECT_SAME(at + " masqueradeAll", g->masquerade_all.value_or(false), c.iptables.masquerade_all);
  KPC_EXPECT_SAME(at + " localhostNodePorts", g->localhost_node_ports.value_or(true), c.iptables.localhost_node_ports);
  KPC_EXPECT_SAME(at + " syncPeriod", g->sync_period.empty() ? int64_t{30'000'000'000} : g->sync_period_ns,
                  c.iptables.sync_period.ns);
  KPC_EXPECT_SAME(at + " minSyncPeriod", g->min_sync_period.empty() ? int64_t{1'000'000'000} : g->min_sync_period_ns,
                  c.iptables.min_sync_period.ns);
  int dl = g->detect_local_mode == "NodeCIDR" ? 1 : 0;
  KPC_EXPECT_SAME(at + " detectLocalMode", dl, static_cast<int>(c.detect_local_mode));
  KPC_EXPECT_SAME(at + " conntrack.maxPerCore", g->conntrack_max_per_core.value_or(-1), c.conntrack.max_per_core.value_or(-1));
  KPC_EXPECT_SAME(at + " conntrack.tcpBeLiberal", g->tcp_be_liberal.value_or(false), c.conntrack.tcp_be_liberal);
  std::string gates, want_gates;
  for (const auto& [k, v] : c.feature_gates) gates += k + "=" + (v ? "1" : "0") + ";";
  for (const auto& [k, v] : g->feature_gates) want_gates += k + "=" + (v ? "1" : "0") + ";";
  KPC_EXPECT_SAME(at + " featureGates", want_gates, gates);
  return "";
}

#undef KPC_EXPECT_SAME

}  // namespace

std::string mismatch(const GeneratedCluster& g, const Snapshot& s) {
  if (g.services.size() != s.services.size())
    return "Services: generated " + std::to_string(g.services.size()) + ", loaded " + std::to_string(s.services.size());
  if (g.slices.size() != s.slices.size())
    return "EndpointSlices: generated " + std::to_string(g.slices.size()) + ", loaded " + std::to_string(s.slices.size());
  if (g.nodes.size() != s.nodes.size())
    return "Nodes: generated " + std::to_string(g.nodes.size()) + ", loaded " + std::to_string(s.nodes.size());
  for (const auto& gs : g.services) {
    const Service* svc = find_by_key(s.services, gs.key());
    if (!svc) return "Service " + gs.key() + " missing";
    if (auto m = service_mismatch(gs, *svc); !m.empty()) return m;
  }
  for (const auto& gs : g.slices) {
    const EndpointSlice* sl = find_by_key(s.slices, gs.key());
    if (!sl) return "EndpointSlice " + gs.key() + " missing";
    if (auto m = slice_mismatch(gs, *sl); !m.empty()) return m;
  }
  for (const auto& gn : g.nodes) {
    const Node* n = s.find_node(gn.name);
    if (!n) return "Node " + gn.name + " missing";
    if (auto m = node_mismatch(gn, *n); !m.empty()) return m;
  }
  return config_mismatch(g.config, s.config);
}

}  // namespace kpc::testgen
