// discovery.k8s.io/v1 EndpointSlice -> EndpointSlice (ValidateEndpointSlice subset).
#include <set>

#include "compiler/model/decode.h"
#include "compiler/model/names.h"
#include "compiler/model/reader.h"

namespace kpc {
namespace {

constexpr size_t kMaxEndpoints = 1000;  // API limits
constexpr size_t kMaxAddresses = 100;
constexpr size_t kMaxPorts = 100;

std::vector<std::string> hint_names(const DocNode* hints, const char* key, const std::string& path, ObjectReader& r) {
  std::vector<std::string> out;
  const DocNode* list = r.seq(hints, key, join_path(path, key));
  if (!list) return out;
  for (size_t i = 0; i < list->items.size(); ++i) {
    std::string p = index_path(join_path(path, key), i);
    if (!r.expect_map(list->items[i], p)) continue;
    if (auto n = r.str(&list->items[i], "name", join_path(p, "name"))) out.push_back(*n);
    else r.error(DiagCode::MissingField, list->items[i].pos, join_path(p, "name"), "required value");
  }
  return out;
}

void decode_endpoint(const DocNode& n, const std::string& path, AddressType at, Endpoint* ep, ObjectReader& r) {
  ep->pos = n.pos;
  if (!r.expect_map(n, path)) return;
  const DocNode* addrs = r.seq(&n, "addresses", join_path(path, "addresses"));
  if (!addrs || addrs->items.empty())
    r.error(DiagCode::MissingField, addrs ? addrs->pos : n.pos, join_path(path, "addresses"), "must contain at least 1 address");
  else if (addrs->items.size() > kMaxAddresses)
    r.error(DiagCode::TooMany, addrs->pos, join_path(path, "addresses"), "must have at most 100 addresses");
  for (size_t i = 0; addrs && i < addrs->items.size(); ++i) {
    std::string p = index_path(join_path(path, "addresses"), i);
    auto s = r.as_str(addrs->items[i], p);
    if (!s) continue;
    if (at == AddressType::FQDN) {
      if (auto err = check_dns1123_subdomain(*s))
        r.error(DiagCode::InvalidName, addrs->items[i].pos, p, "\"" + *s + "\": " + *err);
      ep->fqdn_addresses.push_back(*s);
      continue;
    }
    auto ip = r.ip_text(*s, addrs->items[i].pos, p);
    if (!ip) continue;
    if (auto why = special_ip_reason(*ip)) {
      r.error(DiagCode::InvalidIP, addrs->items[i].pos, p, ip->str() + " " + *why);
      continue;
    }
    IPFamily want = at == AddressType::IPv4 ? IPFamily::V4 : IPFamily::V6;
    if (ip->family != want) {
      r.error(DiagCode::AddressTypeMismatch, addrs->items[i].pos, p,
              "\"" + *s + "\" is not an " + family_name(want) + " address (addressType " + family_name(want) + ")");
      continue;
    }
    ep->addresses.push_back(*ip);
  }
  const DocNode* cond = r.map(&n, "conditions", join_path(path, "conditions"));
  std::string cpath = join_path(path, "conditions");
  ep->ready = r.boolean(cond, "ready", join_path(cpath, "ready"));
  ep->serving = r.boolean(cond, "serving", join_path(cpath, "serving"));
  ep->terminating = r.boolean(cond, "terminating", join_path(cpath, "terminating"));
  if (auto node = r.str(&n, "nodeName", join_path(path, "nodeName"))) {
    if (auto err = check_dns1123_subdomain(*node))
      r.error(DiagCode::InvalidName, n.get("nodeName")->pos, join_path(path, "nodeName"), "\"" + *node + "\": " + *err);
    ep->node_name = *node;
  }
  if (auto zone = r.str(&n, "zone", join_path(path, "zone"))) {
    if (auto err = check_label_value(*zone))
      r.error(DiagCode::InvalidLabel, n.get("zone")->pos, join_path(path, "zone"), "\"" + *zone + "\": " + *err);
    ep->zone = *zone;
  }
  std::string hpath = join_path(path, "hints");
  if (const DocNode* hints = r.map(&n, "hints", hpath)) {
    ep->has_zone_hints = hints->get("forZones") && !hints->get("forZones")->is_null();
    ep->has_node_hints = hints->get("forNodes") && !hints->get("forNodes")->is_null();
    ep->hint_zones = hint_names(hints, "forZones", hpath, r);
    ep->hint_nodes = hint_names(hints, "forNodes", hpath, r);
  }
}

void decode_slice_port(const DocNode& n, const std::string& path, EndpointPort* p, ObjectReader& r) {
  p->pos = n.pos;
  if (!r.expect_map(n, path)) return;
  if (const DocNode* name = n.get("name"); name && !name->is_null()) {
    p->name = r.str(&n, "name", join_path(path, "name"));
    if (p->name && !p->name->empty())
      if (auto err = check_dns1123_label(*p->name))
        r.error(DiagCode::InvalidPortName, name->pos, join_path(path, "name"), "\"" + *p->name + "\": " + *err);
  }
  if (auto proto = r.enumeration(&n, "protocol", join_path(path, "protocol"), {"TCP", "UDP", "SCTP"},
                                 DiagCode::InvalidProtocol))
    p->protocol = static_cast<Protocol>(*proto);
  if (auto port = r.integer(&n, "port", join_path(path, "port"), 1, 65535, DiagCode::PortOutOfRange))
    p->port = static_cast<int32_t>(*port);
  if (auto ap = r.str(&n, "appProtocol", join_path(path, "appProtocol"))) p->app_protocol = *ap;
}

}  // namespace

bool decode_endpoint_slice(const DocNode& obj, EndpointSlice* s, DiagSink& diags) {
  ObjectReader r("EndpointSlice", &s->meta.fields, diags);
  decode_meta(obj, "EndpointSlice", true, /*subdomain*/ 0, &s->meta, r);
  auto at = r.enumeration(&obj, "addressType", "addressType", {"IPv4", "IPv6", "FQDN"}, DiagCode::InvalidEnum);
  if (at) s->address_type = static_cast<AddressType>(*at);
  else if (!obj.get("addressType") || obj.get("addressType")->is_null())
    r.error(DiagCode::MissingField, obj.pos, "addressType", "required value");
  if (const DocNode* eps = r.seq(&obj, "endpoints", "endpoints")) {
    if (eps->items.size() > kMaxEndpoints)
      r.error(DiagCode::TooMany, eps->pos, "endpoints", "must have at most 1000 endpoints");
    s->endpoints.reserve(eps->items.size());
    for (size_t i = 0; i < eps->items.size(); ++i) {
      Endpoint ep;
      decode_endpoint(eps->items[i], index_path("endpoints", i), s->address_type, &ep, r);
      s->endpoints.push_back(std::move(ep));
    }
  }
  if (const DocNode* ports = r.seq(&obj, "ports", "ports")) {
    if (ports->items.size() > kMaxPorts) r.error(DiagCode::TooMany, ports->pos, "ports", "must have at most 100 ports");
    std::set<std::string> names;
    for (size_t i = 0; i < ports->items.size(); ++i) {
      EndpointPort p;
      decode_slice_port(ports->items[i], index_path("ports", i), &p, r);
      if (p.name && !names.insert(*p.name).second)
        r.error(DiagCode::DuplicatePort, p.pos, index_path("ports", i) + ".name", "duplicate port name \"" + *p.name + "\"");
      s->ports.push_back(std::move(p));
    }
  }
  return r.errors() == 0;
}

bool decode_node(const DocNode& obj, Node* node, DiagSink& diags) {
  ObjectReader r("Node", &node->meta.fields, diags);
  decode_meta(obj, "Node", false, 0, &node->meta, r);
  const DocNode* spec = r.map(&obj, "spec", "spec");
  // Each invalid CIDR is reported at its own entry; the singular (older) spec.podCIDR is
  // read only when podCIDRs is absent or empty, and reported under its own path.
  std::vector<ObjectReader::ListEntry> cidrs = r.str_list(spec, "podCIDRs", "spec.podCIDRs");
  const DocNode* list = spec && spec->is_map() ? spec->get("podCIDRs") : nullptr;
  if (list && list->is_seq() && !list->items.empty()) {
    for (const auto& e : cidrs)
      if (auto c = r.cidr_text(e.value, e.pos, index_path("spec.podCIDRs", e.index))) {
        // The API server (ValidateDualStackCIDRs) allows one CIDR per IP family; NodeCIDR
        // local-traffic detection would silently use the first of a family.
        bool repeated = false;
        for (const auto& prev : node->pod_cidrs) repeated |= prev.family() == c->family();
        if (repeated)
          r.error(DiagCode::InvalidCIDR, e.pos, index_path("spec.podCIDRs", e.index),
                  "\"" + e.value + "\": may specify no more than one CIDR for each IP family");
        node->pod_cidrs.push_back(*c);
      }
  } else if (auto c = r.str(spec, "podCIDR", "spec.podCIDR"); c && !c->empty()) {
    if (auto cidr = r.cidr_text(*c, spec->get("podCIDR")->pos, "spec.podCIDR")) node->pod_cidrs.push_back(*cidr);
  }
  const DocNode* status = r.map(&obj, "status", "status");
  if (const DocNode* addrs = r.seq(status, "addresses", "status.addresses")) {
    for (size_t i = 0; i < addrs->items.size(); ++i) {
      std::string p = index_path("status.addresses", i);
      if (!r.expect_map(addrs->items[i], p)) continue;
      NodeAddress a;
      a.type = r.str(&addrs->items[i], "type", join_path(p, "type")).value_or("");
      a.address = r.str(&addrs->items[i], "address", join_path(p, "address")).value_or("");
      if ((a.type == "InternalIP" || a.type == "ExternalIP"))
        r.ip_text(a.address, addrs->items[i].pos, join_path(p, "address"));
      node->addresses.push_back(std::move(a));
    }
  }
  return r.errors() == 0;
}

bool decode_service_cidr(const DocNode& obj, ServiceCIDR* out, DiagSink& diags) {
  ObjectReader r("ServiceCIDR", &out->meta.fields, diags);
  decode_meta(obj, "ServiceCIDR", false, 0, &out->meta, r);
  const DocNode* spec = r.map(&obj, "spec", "spec");
  std::vector<ObjectReader::ListEntry> cidrs = r.str_list(spec, "cidrs", "spec.cidrs");
  // The API server requires at least one range ("at least one CIDR required"): no spec, no
  // cidrs, null or [] is a missing field (a spec or cidrs of the wrong type is E0100 alone).
  const DocNode* list = spec ? spec->get("cidrs") : nullptr;
  bool wrong_type = obj.get("spec") && !obj.get("spec")->is_null() && !spec;
  wrong_type |= list && !list->is_null() && !list->is_seq();
  if (!wrong_type && (!list || !list->is_seq() || list->items.empty()))
    r.error(DiagCode::MissingField, list ? list->pos : spec ? spec->pos : out->meta.pos, "spec.cidrs",
            "required value: at least one CIDR");
  if (cidrs.size() > 2) r.error(DiagCode::TooMany, spec->get("cidrs")->pos, "spec.cidrs", "must have at most 2 items");
  for (const auto& e : cidrs)
    if (auto c = r.cidr_text(e.value, e.pos, index_path("spec.cidrs", e.index))) {
      // The API server allows one range per family (ValidateServiceCIDR).
      bool repeated = false;
      for (const auto& prev : out->cidrs) repeated |= prev.family() == c->family();
      if (repeated)
        r.error(DiagCode::InvalidCIDR, e.pos, index_path("spec.cidrs", e.index),
                "\"" + e.value + "\": may specify no more than one CIDR for each IP family");
      out->cidrs.push_back(*c);
    }
  return r.errors() == 0;
}

}  // namespace kpc
