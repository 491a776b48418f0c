// kpc-gen-cluster: writes the benchmark cluster to files.
// Usage: kpc-gen-cluster OUT_PREFIX [SERVICES [ENDPOINTS_PER_SERVICE]]
//   -> OUT_PREFIX.json and OUT_PREFIX.yaml
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "bench/synthetic_cluster.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_PREFIX [SERVICES [ENDPOINTS_PER_SERVICE]]\n", argv[0]);
    return 2;
  }
  kpc::bench::ClusterShape shape;
  if (argc > 2) shape.services = std::atoi(argv[2]);
  if (argc > 3) shape.endpoints_per_service = std::atoi(argv[3]);
  std::string prefix = argv[1];
  std::ofstream(prefix + ".json") << kpc::bench::synthetic_cluster_json(shape);
  std::ofstream(prefix + ".yaml") << kpc::bench::synthetic_cluster_yaml(shape);
  return 0;
}
