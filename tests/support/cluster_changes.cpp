#include "tests/support/cluster_changes.h"

#include <rapidcheck.h>

#include <algorithm>

namespace kpc::test {

std::string fresh_ip(bool v6, int n) {
  return v6 ? "fd00:10:250::" + std::to_string(1000 + n) : "10.250." + std::to_string(n / 250) + "." + std::to_string(n % 250 + 1);
}

// One random change of the kinds kube-proxy sees every day.
void mutate_cluster(testgen::GeneratedCluster& c, int serial) {
  const int kind = *rc::gen::inRange(0, 9);
  if (c.services.empty() || kind == 0) {  // add a Service (a copy of a ClusterIP-shaped one)
    testgen::GenService s;
    s.ns = "added";
    s.name = "svc-" + std::to_string(serial);
    s.cluster_ips = {"10.97." + std::to_string(serial / 250) + "." + std::to_string(serial % 250 + 1)};
    s.ports.push_back({"", "TCP", 80 + serial % 10, 8080, "", 0, ""});
    testgen::GenSlice sl;
    sl.ns = s.ns;
    sl.name = s.name + "-1";
    sl.service_name = s.name;
    sl.address_type = "IPv4";
    sl.ports.push_back({"", "TCP", 8080});
    for (int e = 0; e < *rc::gen::inRange(0, 4); ++e) {
      testgen::GenEndpoint ep;
      ep.addresses = {fresh_ip(false, serial * 8 + e)};
      ep.node_name = c.nodes.empty() ? "" : c.nodes[static_cast<size_t>(e) % c.nodes.size()].name;
      sl.endpoints.push_back(ep);
    }
    c.services.push_back(s);
    c.slices.push_back(sl);
    return;
  }
  auto& svc = c.services[static_cast<size_t>(*rc::gen::inRange<size_t>(0, c.services.size()))];
  std::vector<testgen::GenSlice*> slices;
  for (auto& sl : c.slices)
    if (sl.ns == svc.ns && sl.service_name == svc.name) slices.push_back(&sl);
  testgen::GenSlice* slice = slices.empty() ? nullptr : slices[static_cast<size_t>(*rc::gen::inRange<size_t>(0, slices.size()))];
  switch (kind) {
    case 1: {  // delete the Service (its slices stay half the time, as in kube-proxy's tests)
      std::string ns = svc.ns, name = svc.name;
      c.services.erase(std::find_if(c.services.begin(), c.services.end(),
                                    [&](const auto& s) { return s.ns == ns && s.name == name; }));
      if (*rc::gen::arbitrary<bool>())
        c.slices.erase(std::remove_if(c.slices.begin(), c.slices.end(),
                                      [&](const auto& sl) { return sl.ns == ns && sl.service_name == name; }),
                       c.slices.end());
      return;
    }
    case 2:  // scale up
      if (slice) {
        testgen::GenEndpoint ep;
        ep.addresses = {fresh_ip(slice->address_type == "IPv6", serial)};
        ep.node_name = c.nodes[static_cast<size_t>(serial) % c.nodes.size()].name;
        slice->endpoints.push_back(ep);
      }
      return;
    case 3:  // scale down
      if (slice && !slice->endpoints.empty()) slice->endpoints.pop_back();
      return;
    case 4:  // endpoints to zero
      if (slice) slice->endpoints.clear();
      return;
    case 5:  // an endpoint starts terminating (or stops)
      if (slice && !slice->endpoints.empty()) {
        auto& ep = slice->endpoints[0];
        bool term = !ep.terminating.value_or(false);
        ep.terminating = term;
        ep.ready = !term;
        ep.serving = true;
      }
      return;
    case 6:  // port change
      if (!svc.ports.empty()) {
        int p = svc.ports[0].port % 60000 + 1;
        bool clash = false;
        for (const auto& o : svc.ports) clash |= o.port == p && o.protocol == svc.ports[0].protocol;
        if (!clash) svc.ports[0].port = p;
      }
      return;
    case 7:  // internal traffic policy flips
      svc.internal_traffic_policy = svc.internal_traffic_policy == "Local" ? "Cluster" : "Local";
      return;
    case 8:  // session affinity on/off
      svc.client_ip_affinity = !svc.client_ip_affinity;
      return;
    default:  // external traffic policy flips (where the API allows it)
      if (svc.type == "NodePort" || svc.type == "LoadBalancer")
        svc.external_traffic_policy = svc.external_traffic_policy == "Local" ? "Cluster" : "Local";
      return;
  }
}

}  // namespace kpc::test
