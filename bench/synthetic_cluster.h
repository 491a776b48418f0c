// Deterministic synthetic clusters for benchmarks: N Services with E endpoints
// each and a mix of the features kube-proxy renders (ClusterIP, NodePort,
// LoadBalancer with source ranges, eTP=Local, ClientIP affinity, two-port
// services), as kubectl would print them. 10,000 x 10 gives the issues'
// reference size (~30 MB of JSON, ~20 MB of YAML).
#pragma once

#include <string>

namespace kpc::bench {

struct ClusterShape {
  int services = 10000;
  int endpoints_per_service = 10;
  int nodes = 100;
};

/// One `kind: List` JSON document (kubectl get ... -o json).
std::string synthetic_cluster_json(const ClusterShape& shape);
/// Multi-document YAML (one object per document).
std::string synthetic_cluster_yaml(const ClusterShape& shape);

}  // namespace kpc::bench
