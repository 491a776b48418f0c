#include "applier/node/object_store.h"

#include <algorithm>

namespace kpc::applier {

void ObjectStore::replace_all(const Snapshot& s) {
  services_.clear();
  slices_.clear();
  nodes_.clear();
  for (const auto& x : s.services) services_[{x.meta.ns, x.meta.name}] = x;
  for (const auto& x : s.slices) slices_[{x.meta.ns, x.meta.name}] = x;
  for (const auto& x : s.nodes) nodes_[x.meta.name] = x;
  cidrs_ = s.service_cidrs;
  config_ = s.config;
  env_ = s.env;
  dirty_ = true;
}

void ObjectStore::update_service_cidr(const ServiceCIDR& c) {
  delete_service_cidr(c.meta.name);
  auto at = std::lower_bound(cidrs_.begin(), cidrs_.end(), c.meta.name,
                             [](const ServiceCIDR& x, const std::string& n) { return x.meta.name < n; });
  cidrs_.insert(at, c);
  dirty_ = true;
}

void ObjectStore::delete_service_cidr(const std::string& name) {
  dirty_ |= std::erase_if(cidrs_, [&](const ServiceCIDR& x) { return x.meta.name == name; }) > 0;
}

const Snapshot& ObjectStore::snapshot() {
  if (!dirty_) return snap_;
  snap_ = Snapshot{};
  for (const auto& [k, v] : services_) snap_.services.push_back(v);
  for (const auto& [k, v] : slices_) snap_.slices.push_back(v);
  for (const auto& [k, v] : nodes_) snap_.nodes.push_back(v);
  snap_.service_cidrs = cidrs_;
  snap_.config = config_;
  snap_.env = env_;
  dirty_ = false;
  return snap_;
}

}  // namespace kpc::applier
