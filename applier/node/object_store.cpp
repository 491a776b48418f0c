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

std::shared_ptr<const Snapshot> ObjectStore::shared_snapshot() {
  if (!dirty_ && snap_) return snap_;
  auto s = std::make_shared<Snapshot>();
  s->services.reserve(services_.size());
  s->slices.reserve(slices_.size());
  for (const auto& [k, v] : services_) s->services.push_back(v);
  for (const auto& [k, v] : slices_) s->slices.push_back(v);
  for (const auto& [k, v] : nodes_) s->nodes.push_back(v);
  s->service_cidrs = cidrs_;
  s->config = config_;
  s->env = env_;
  snap_ = std::move(s);
  dirty_ = false;
  return snap_;
}

}  // namespace kpc::applier
