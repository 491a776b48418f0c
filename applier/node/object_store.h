// What the applier holds of the cluster: the objects its sources delivered, keyed as the API
// server keys them. The IncrementalCompilers hold the same objects for compiling; this copy
// gives the Snapshot that the verifier's full program is compiled from (the reference for
// prior ⊕ partial ≡ full), and the node's configuration and host facts.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "compiler/model/objects.h"

namespace kpc::applier {

class ObjectStore {
 public:
  using Key = std::pair<std::string, std::string>;  // namespace, name ("" for Nodes)
  void update_service(const Service& s) { services_[{s.meta.ns, s.meta.name}] = s, dirty_ = true; }
  void delete_service(const std::string& ns, const std::string& name) { dirty_ |= services_.erase({ns, name}) > 0; }
  void update_slice(const EndpointSlice& s) { slices_[{s.meta.ns, s.meta.name}] = s, dirty_ = true; }
  void delete_slice(const std::string& ns, const std::string& name) { dirty_ |= slices_.erase({ns, name}) > 0; }
  void update_node(const Node& n) { nodes_[n.meta.name] = n, dirty_ = true; }
  void delete_node(const std::string& name) { dirty_ |= nodes_.erase(name) > 0; }
  void set_config(const ProxyConfig& c) { config_ = c, dirty_ = true; }
  void set_environment(const NodeEnvironment& e) { env_ = e, dirty_ = true; }
  void set_service_cidrs(const std::vector<ServiceCIDR>& c) { cidrs_ = c, dirty_ = true; }
  /// One ServiceCIDR (kept sorted by name, as the loader sorts them).
  void update_service_cidr(const ServiceCIDR& c);
  void delete_service_cidr(const std::string& name);
  /// Everything from a snapshot (objects it lacks are dropped).
  void replace_all(const Snapshot& s);

  const ProxyConfig& config() const { return config_; }
  const NodeEnvironment& environment() const { return env_; }
  size_t service_count() const { return services_.size(); }
  /// The held objects as a Snapshot, sorted as the loader sorts (cached until a change).
  const Snapshot& snapshot() { return *shared_snapshot(); }
  /// The same, shared: a change builds a new one, so a holder (the drift checker's thread)
  /// keeps the objects of the sync it checks, unchanged, while the loop goes on.
  std::shared_ptr<const Snapshot> shared_snapshot();

 private:
  std::map<Key, Service> services_;
  std::map<Key, EndpointSlice> slices_;
  std::map<std::string, Node> nodes_;
  std::vector<ServiceCIDR> cidrs_;
  ProxyConfig config_;
  NodeEnvironment env_;
  std::shared_ptr<const Snapshot> snap_;
  bool dirty_ = true;
};

}  // namespace kpc::applier
