#include "tests/support/cluster_events.h"

#include <rapidcheck.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <vector>

namespace kpc::test {

using testgen::GeneratedCluster;

// Changes to the node kube-proxy runs on, another node, or the configuration.
void change_host(GeneratedCluster& c, int serial) {
  switch (*rc::gen::inRange(0, 5)) {
    case 0:  // this node's topology zone: kube-proxy restarts, a full sync
      c.nodes[0].zone = c.nodes[0].zone == "zone-a" ? "zone-b" : "zone-a";
      return;
    case 1:  // another node comes
      c.nodes.push_back({"node-x" + std::to_string(serial), "zone-b", {}, {"192.168.1." + std::to_string(serial % 250 + 1)}});
      return;
    case 2:  // another node goes
      if (c.nodes.size() > 1) c.nodes.pop_back();
      return;
    case 3:  // masqueradeAll: a restart
      c.config->masquerade_all = !c.config->masquerade_all.value_or(false);
      return;
    default:  // syncPeriod: decides whether a throttled cleanup is skipped
      if (c.config->sync_period.empty()) {
        c.config->sync_period = "1h0m0s";
        c.config->sync_period_ns = 3600'000'000'000;
      } else {
        c.config->sync_period.clear();
        c.config->sync_period_ns = 0;
      }
      return;
  }
}

Documents documents(const GeneratedCluster& compilable) {
  Documents d;
  auto docs = compilable.yaml_documents();  // services, slices, nodes, config
  size_t i = 0;
  for (const auto& s : compilable.services) d.services[{s.ns, s.name}] = docs[i++];
  for (const auto& s : compilable.slices) d.slices[{s.ns, s.name}] = docs[i++];
  for (const auto& n : compilable.nodes) d.nodes[{"", n.name}] = docs[i++];
  if (compilable.config) d.config = docs[i++];
  return d;
}

namespace {
template <typename T>
const T& find_object(const std::vector<T>& objects, const Key& k) {
  for (const auto& o : objects)
    if (o.meta.ns == k.first && o.meta.name == k.second) return o;
  throw std::logic_error("object not in the loaded snapshot: " + k.first + "/" + k.second);
}

}  // namespace

void send_events(IncrementalCompiler& ic, const Documents& from, const Documents& to, const Snapshot& next) {
  std::vector<std::function<void()>> events;
  auto diff = [&](const std::map<Key, std::string>& a, const std::map<Key, std::string>& b, auto update, auto remove) {
    for (const auto& kv : b) {
      const Key k = kv.first;
      auto it = a.find(k);
      if (it == a.end() || it->second != kv.second || *rc::gen::inRange(0, 8) == 0)
        events.push_back([=] { update(k); });
    }
    for (const auto& kv : a) {
      const Key k = kv.first;
      if (!b.count(k)) events.push_back([=] { remove(k); });
    }
  };
  diff(from.services, to.services, [&](const Key& k) { ic.update_service(find_object(next.services, k)); },
       [&](const Key& k) { ic.delete_service(k.first, k.second); });
  diff(from.slices, to.slices, [&](const Key& k) { ic.update_slice(find_object(next.slices, k)); },
       [&](const Key& k) { ic.delete_slice(k.first, k.second); });
  diff(from.nodes, to.nodes, [&](const Key& k) { ic.update_node(find_object(next.nodes, k)); },
       [&](const Key& k) { ic.delete_node(k.second); });
  if (from.config != to.config) events.push_back([&] { ic.update_config(next.config); });
  auto order = *rc::gen::container<std::vector<int>>(events.size(), rc::gen::arbitrary<int>());
  std::vector<size_t> idx(events.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return order[a] < order[b]; });
  for (size_t i : idx) events[i]();
}

}  // namespace kpc::test
