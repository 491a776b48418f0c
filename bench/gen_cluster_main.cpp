// kpc-gen-cluster: writes the benchmark cluster to files.
// Usage: kpc-gen-cluster OUT_PREFIX [SERVICES [ENDPOINTS_PER_SERVICE]]
//   -> OUT_PREFIX.json and OUT_PREFIX.yaml
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "bench/synthetic_cluster.h"

namespace {

constexpr const char* kUsage =
    "Usage: kpc-gen-cluster OUT_PREFIX [SERVICES [ENDPOINTS_PER_SERVICE]]\n"
    "Writes the synthetic benchmark cluster (default 10,000 Services x 10 endpoints) to OUT_PREFIX.json and\n"
    "OUT_PREFIX.yaml.\nExit codes: 0 written, 2 bad arguments or a file that cannot be written.\n";

// A count argument: digits only, 1..10,000,000.
bool count(const char* s, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < 1 || v > 10000000) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc < 2 || argc > 4 || argv[1][0] == '-') {
    std::fputs(kUsage, stderr);
    return 2;
  }
  kpc::bench::ClusterShape shape;
  if ((argc > 2 && !count(argv[2], &shape.services)) || (argc > 3 && !count(argv[3], &shape.endpoints_per_service))) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string prefix = argv[1];
  for (const char* ext : {".json", ".yaml"}) {
    std::ofstream out(prefix + ext);
    out << (std::string(ext) == ".json" ? kpc::bench::synthetic_cluster_json(shape)
                                        : kpc::bench::synthetic_cluster_yaml(shape));
    if (!out.flush()) {
      std::fprintf(stderr, "kpc-gen-cluster: %s%s: cannot write\n", prefix.c_str(), ext);
      return 2;
    }
  }
  return 0;
}
