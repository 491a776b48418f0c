// v1 Service -> Service, with the API server's validation of every field
// kube-proxy reads (pkg/apis/core/validation ValidateService, the relevant subset).
#include <set>

#include "compiler/model/decode.h"
#include "compiler/model/names.h"
#include "compiler/model/reader.h"
#include "compiler/support/text.h"

namespace kpc {
namespace {

void decode_port(const DocNode& n, const std::string& path, ServicePort* p, ObjectReader& r) {
  p->pos = n.pos;
  if (!r.expect_map(n, path)) return;
  if (auto name = r.str(&n, "name", join_path(path, "name"))) {
    p->name = *name;
    if (!name->empty())
      if (auto err = check_dns1123_label(*name))
        r.error(DiagCode::InvalidPortName, n.get("name")->pos, join_path(path, "name"), "\"" + *name + "\": " + *err);
  }
  if (auto proto = r.enumeration(&n, "protocol", join_path(path, "protocol"), {"TCP", "UDP", "SCTP"},
                                 DiagCode::InvalidProtocol))
    p->protocol = static_cast<Protocol>(*proto);
  if (auto port = r.integer(&n, "port", join_path(path, "port"), 1, 65535, DiagCode::PortOutOfRange))
    p->port = static_cast<int32_t>(*port);
  else if (!n.get("port") || n.get("port")->is_null())
    r.error(DiagCode::MissingField, n.pos, join_path(path, "port"), "required value");
  if (auto np = r.integer(&n, "nodePort", join_path(path, "nodePort"), 0, 65535, DiagCode::PortOutOfRange))
    p->node_port = static_cast<int32_t>(*np);
  if (const DocNode* tp = r.child(&n, "targetPort", join_path(path, "targetPort"))) {
    std::string tpath = join_path(path, "targetPort");
    if (tp->kind == DocNode::Kind::Int) {
      if (auto v = r.integer(&n, "targetPort", tpath, 1, 65535, DiagCode::PortOutOfRange))
        p->target_port = static_cast<int32_t>(*v);
    } else if (auto s = r.as_str(*tp, tpath)) {
      if (auto err = check_iana_svc_name(*s))
        r.error(DiagCode::InvalidPortName, tp->pos, tpath, "\"" + *s + "\": " + *err);
      p->target_port_name = *s;
    }
  }
  if (auto ap = r.str(&n, "appProtocol", join_path(path, "appProtocol"))) p->app_protocol = *ap;
}

void decode_ports(const DocNode* spec, Service* svc, ObjectReader& r) {
  const DocNode* ports = r.seq(spec, "ports", "spec.ports");
  if (!ports) return;
  for (size_t i = 0; i < ports->items.size(); ++i) {
    ServicePort p;
    decode_port(ports->items[i], index_path("spec.ports", i), &p, r);
    svc->ports.push_back(std::move(p));
  }
  // Names are required on multi-port Services and unique; port+protocol unique.
  std::set<std::string> names;
  std::set<std::pair<int32_t, Protocol>> ports_seen;
  for (size_t i = 0; i < svc->ports.size(); ++i) {
    const auto& p = svc->ports[i];
    std::string path = index_path("spec.ports", i);
    if (svc->ports.size() > 1 && p.name.empty())
      r.error(DiagCode::PortNameRequired, p.pos, join_path(path, "name"), "required value (the Service has several ports)");
    if (!p.name.empty() && !names.insert(p.name).second)
      r.error(DiagCode::DuplicatePort, p.pos, join_path(path, "name"), "duplicate port name \"" + p.name + "\"");
    if (p.port && !ports_seen.insert({p.port, p.protocol}).second)
      r.error(DiagCode::DuplicatePort, p.pos, path,
              "duplicate port " + std::to_string(p.port) + "/" + protocol_name(p.protocol));
  }
}

void decode_cluster_ips(const DocNode* spec, Service* svc, ObjectReader& r) {
  auto cip = r.str(spec, "clusterIP", "spec.clusterIP");
  // Entries keep their index as written: a non-string entry (reported by str_list) must not
  // shift the paths and positions of the entries after it.
  std::vector<ObjectReader::ListEntry> cips = r.str_list(spec, "clusterIPs", "spec.clusterIPs");
  const DocNode* cips_node = spec ? spec->get("clusterIPs") : nullptr;
  const size_t listed = cips_node && cips_node->is_seq() ? cips_node->items.size() : 0;
  if (cip && !cips.empty() && cips[0].index == 0 && cips[0].value != *cip)
    r.error(DiagCode::FamilyMismatch, cips_node->pos, "spec.clusterIPs[0]",
            "must match spec.clusterIP \"" + *cip + "\"");
  // Positions come from clusterIPs when the list is what we read, else from clusterIP.
  const bool from_list = listed > 0;
  if (!from_list && cip && !cip->empty()) {
    Pos pos = spec->get("clusterIP")->pos;
    cips.push_back(ObjectReader::ListEntry{0, pos, *cip});
    // The API server defaults clusterIPs from clusterIP: later checks (E0602) that speak of
    // spec.clusterIPs[0] find it at the clusterIP.
    r.record("spec.clusterIPs[0]", pos);
  }
  const size_t count = from_list ? listed : cips.size();
  if (count > 2) r.error(DiagCode::TooMany, cips_node->pos, "spec.clusterIPs", "may have at most 2 entries");
  for (const auto& e : cips) {
    if (e.index >= 2) continue;
    std::string path = from_list ? index_path("spec.clusterIPs", e.index) : "spec.clusterIP";
    if (e.value == "None") {
      if (count != 1) r.error(DiagCode::FamilyMismatch, e.pos, path, "\"None\" must be the only cluster IP");
      svc->headless = true;
      continue;
    }
    if (auto ip = r.ip_text(e.value, e.pos, path)) {
      if (ip->is_unspecified()) r.error(DiagCode::InvalidIP, e.pos, path, "may not be the unspecified address");
      svc->cluster_ips.push_back(*ip);
    }
  }
  if (svc->cluster_ips.size() == 2 && svc->cluster_ips[0].family == svc->cluster_ips[1].family)
    r.error(DiagCode::FamilyMismatch, cips_node->pos, "spec.clusterIPs", "the two cluster IPs must be of different families");

  const DocNode* fams = r.seq(spec, "ipFamilies", "spec.ipFamilies");
  if (fams) {
    for (size_t i = 0; i < fams->items.size(); ++i) {
      std::string path = index_path("spec.ipFamilies", i);
      auto s = r.as_str(fams->items[i], path);
      if (!s) continue;
      if (*s != "IPv4" && *s != "IPv6") {
        r.error(DiagCode::InvalidEnum, fams->items[i].pos, path, "unsupported value \"" + *s + "\": supported values: \"IPv4\", \"IPv6\"");
        continue;
      }
      IPFamily f = *s == "IPv4" ? IPFamily::V4 : IPFamily::V6;
      for (IPFamily g : svc->ip_families)
        if (g == f) r.error(DiagCode::FamilyMismatch, fams->items[i].pos, path, "duplicate family " + *s);
      svc->ip_families.push_back(f);
    }
    if (svc->ip_families.size() > 2) r.error(DiagCode::TooMany, fams->pos, "spec.ipFamilies", "may have at most 2 entries");
    for (size_t i = 0; i < svc->cluster_ips.size() && i < svc->ip_families.size(); ++i)
      if (svc->cluster_ips[i].family != svc->ip_families[i])
        r.error(DiagCode::FamilyMismatch, fams->items[i].pos, index_path("spec.ipFamilies", i),
                std::string(family_name(svc->ip_families[i])) + " does not match spec.clusterIPs[" + std::to_string(i) +
                    "] " + svc->cluster_ips[i].str());
  }
  if (auto pol = r.enumeration(spec, "ipFamilyPolicy", "spec.ipFamilyPolicy",
                               {"SingleStack", "PreferDualStack", "RequireDualStack"}, DiagCode::InvalidEnum)) {
    svc->ip_family_policy = static_cast<IPFamilyPolicy>(*pol);
    size_t n = std::max(svc->cluster_ips.size(), svc->ip_families.size());
    if (*pol == 0 && n > 1)
      r.error(DiagCode::FamilyMismatch, spec->get("ipFamilyPolicy")->pos, "spec.ipFamilyPolicy",
              "SingleStack allows only one IP family");
    if (*pol == 2 && !svc->headless && !svc->cluster_ips.empty() && svc->cluster_ips.size() < 2)
      r.error(DiagCode::FamilyMismatch, spec->get("ipFamilyPolicy")->pos, "spec.ipFamilyPolicy",
              "RequireDualStack needs two cluster IPs");
  }
}

void decode_external(const DocNode* spec, const DocNode& obj, Service* svc, ObjectReader& r) {
  if (const DocNode* eips = r.seq(spec, "externalIPs", "spec.externalIPs")) {
    for (size_t i = 0; i < eips->items.size(); ++i) {
      std::string path = index_path("spec.externalIPs", i);
      if (auto ip = r.ip(eips->items[i], path)) {
        if (auto why = special_ip_reason(*ip))
          r.error(DiagCode::InvalidIP, eips->items[i].pos, path, ip->str() + " " + *why);
        else
          svc->external_ips.push_back(*ip);
      }
    }
  }
  if (auto lbip = r.str(spec, "loadBalancerIP", "spec.loadBalancerIP"); lbip && !lbip->empty())
    svc->load_balancer_ip = r.ip_text(*lbip, spec->get("loadBalancerIP")->pos, "spec.loadBalancerIP");
  if (const DocNode* ranges = r.seq(spec, "loadBalancerSourceRanges", "spec.loadBalancerSourceRanges")) {
    if (svc->effective_type() != ServiceType::LoadBalancer && !ranges->items.empty())
      r.error(DiagCode::FieldNotAllowed, ranges->pos, "spec.loadBalancerSourceRanges",
              "may only be used when `type` is 'LoadBalancer'");
    for (size_t i = 0; i < ranges->items.size(); ++i) {
      std::string path = index_path("spec.loadBalancerSourceRanges", i);
      // Space padding is allowed for historical reasons (the API server trims too).
      if (auto s = r.as_str(ranges->items[i], path))
        if (auto c = r.cidr_text(trim(*s), ranges->items[i].pos, path)) svc->load_balancer_source_ranges.push_back(*c);
    }
  }
  const DocNode* status = r.map(&obj, "status", "status");
  const DocNode* lb = r.map(status, "loadBalancer", "status.loadBalancer");
  if (const DocNode* ing = r.seq(lb, "ingress", "status.loadBalancer.ingress")) {
    for (size_t i = 0; i < ing->items.size(); ++i) {
      std::string path = index_path("status.loadBalancer.ingress", i);
      const DocNode& n = ing->items[i];
      LoadBalancerIngress li;
      li.pos = n.pos;
      if (!r.expect_map(n, path)) continue;
      if (auto ip = r.str(&n, "ip", join_path(path, "ip")); ip && !ip->empty())
        li.ip = r.ip_text(*ip, n.get("ip")->pos, join_path(path, "ip"));
      if (auto h = r.str(&n, "hostname", join_path(path, "hostname"))) li.hostname = *h;
      if (auto m = r.enumeration(&n, "ipMode", join_path(path, "ipMode"), {"VIP", "Proxy"}, DiagCode::InvalidEnum)) {
        li.ip_mode = static_cast<LoadBalancerIPMode>(*m);
        if (!li.ip) r.error(DiagCode::FieldNotAllowed, n.get("ipMode")->pos, join_path(path, "ipMode"), "requires ip to be set");
      }
      svc->load_balancer_ingress.push_back(std::move(li));
    }
  }
}

void decode_policies(const DocNode* spec, Service* svc, ObjectReader& r) {
  ServiceType t = svc->effective_type();
  bool external_type = t == ServiceType::NodePort || t == ServiceType::LoadBalancer;
  if (auto p = r.enumeration(spec, "externalTrafficPolicy", "spec.externalTrafficPolicy", {"Cluster", "Local"},
                             DiagCode::InvalidEnum)) {
    svc->external_traffic_policy = static_cast<TrafficPolicy>(*p);
    if (!external_type && svc->external_ips.empty() && t != ServiceType::ExternalName)
      r.error(DiagCode::FieldNotAllowed, spec->get("externalTrafficPolicy")->pos, "spec.externalTrafficPolicy",
              "may only be set for externally-accessible services (NodePort, LoadBalancer or with externalIPs)");
  }
  if (auto p = r.enumeration(spec, "internalTrafficPolicy", "spec.internalTrafficPolicy", {"Cluster", "Local"},
                             DiagCode::InvalidEnum))
    svc->internal_traffic_policy = static_cast<TrafficPolicy>(*p);
  if (auto hc = r.integer(spec, "healthCheckNodePort", "spec.healthCheckNodePort", 0, 65535, DiagCode::PortOutOfRange)) {
    svc->health_check_node_port = static_cast<int32_t>(*hc);
    if (*hc != 0 && !(t == ServiceType::LoadBalancer && svc->external_traffic_policy == TrafficPolicy::Local))
      // The API server rejects this; kube-proxy ignores the value. Legacy objects have it.
      r.error(DiagCode::WarnIgnoredValue, spec->get("healthCheckNodePort")->pos, "spec.healthCheckNodePort",
              "only used when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'; ignored, as kube-proxy does");
  }
  if (auto a = r.enumeration(spec, "sessionAffinity", "spec.sessionAffinity", {"None", "ClientIP"}, DiagCode::InvalidEnum))
    svc->session_affinity = static_cast<SessionAffinity>(*a);
  const DocNode* sac = r.map(spec, "sessionAffinityConfig", "spec.sessionAffinityConfig");
  const DocNode* cip = r.map(sac, "clientIP", "spec.sessionAffinityConfig.clientIP");
  if (sac && svc->session_affinity != SessionAffinity::ClientIP && cip)
    r.error(DiagCode::FieldNotAllowed, sac->pos, "spec.sessionAffinityConfig",
            "must not be set when `sessionAffinity` is not 'ClientIP'");
  if (auto to = r.integer(cip, "timeoutSeconds", "spec.sessionAffinityConfig.clientIP.timeoutSeconds", 1, 86400,
                          DiagCode::AffinityTimeout))
    svc->affinity_timeout_seconds = static_cast<int32_t>(*to);
  if (auto td = r.enumeration(spec, "trafficDistribution", "spec.trafficDistribution",
                              {"PreferClose", "PreferSameZone", "PreferSameNode"}, DiagCode::InvalidEnum))
    svc->traffic_distribution = std::vector<std::string>{"PreferClose", "PreferSameZone", "PreferSameNode"}[*td];
  // KEP-4963's one value; any other is the API server's "Unsupported value" (a located error).
  if (auto th = r.enumeration(spec, "trafficHint", "spec.trafficHint", {"LongLived"}, DiagCode::InvalidEnum))
    svc->traffic_hint_long_lived = *th == 0;
}

void check_type_rules(const DocNode* spec, Service* svc, ObjectReader& r) {
  ServiceType t = svc->effective_type();
  if (t == ServiceType::ExternalName) {
    auto en = r.str(spec, "externalName", "spec.externalName");
    // The API server allows one trailing dot (a fully qualified name) and no upper case.
    std::string_view name = en ? std::string_view(*en) : std::string_view();
    if (!name.empty() && name.back() == '.') name.remove_suffix(1);
    if (!en || en->empty())
      r.error(DiagCode::MissingField, spec ? spec->pos : svc->meta.pos, "spec.externalName", "required value for type ExternalName");
    else if (auto err = check_dns1123_subdomain(name))
      r.error(DiagCode::InvalidName, spec->get("externalName")->pos, "spec.externalName", "\"" + *en + "\": " + *err);
    else
      svc->external_name = *en;
    return;
  }
  if (svc->ports.empty() && !svc->headless)
    r.error(DiagCode::MissingField, spec ? spec->pos : svc->meta.pos, "spec.ports", "required value");
  bool node_ports_allowed = t == ServiceType::NodePort || t == ServiceType::LoadBalancer;
  for (size_t i = 0; i < svc->ports.size(); ++i)
    if (svc->ports[i].node_port != 0 && !node_ports_allowed)
      // Rejected by the API server for type ClusterIP, but kube-proxy serves the nodePort of
      // any Service that has one (its unit tests rely on it), so kpc warns and compiles it.
      r.error(DiagCode::WarnIgnoredValue, svc->ports[i].pos, index_path("spec.ports", i) + ".nodePort",
              "the API server rejects a nodePort when `type` is 'ClusterIP'; kube-proxy still serves it");
}

}  // namespace

bool decode_service(const DocNode& obj, Service* svc, DiagSink& diags) {
  ObjectReader r("Service", &svc->meta.fields, diags);
  decode_meta(obj, "Service", true, /*DNS-1035*/ 1, &svc->meta, r);
  const DocNode* spec = r.map(&obj, "spec", "spec");
  if (auto t = r.enumeration(spec, "type", "spec.type", {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"},
                             DiagCode::InvalidEnum))
    svc->type = static_cast<ServiceType>(*t);
  decode_cluster_ips(spec, svc, r);
  decode_ports(spec, svc, r);
  decode_external(spec, obj, svc, r);
  decode_policies(spec, svc, r);
  check_type_rules(spec, svc, r);
  return r.errors() == 0;
}

}  // namespace kpc
