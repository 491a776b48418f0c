#include "applier/node/object_store.h"

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
