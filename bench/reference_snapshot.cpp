#include "bench/reference_snapshot.h"

#include "bench/synthetic_cluster.h"
#include "compiler/model/loader.h"

namespace kpc::bench {

const std::string& reference_cluster_text(bool json) {
  static const std::string j = synthetic_cluster_json(ClusterShape{});
  static const std::string y = synthetic_cluster_yaml(ClusterShape{});
  return json ? j : y;
}

const Snapshot& reference_snapshot() {
  static Snapshot snap = [] {
    SourceManager sm;
    DiagSink diags;
    Snapshot s;
    load_snapshot_text({{"cluster.json", reference_cluster_text(true)}}, LoadOptions{}, sm, &s, diags);
    return s;
  }();
  return snap;
}

}  // namespace kpc::bench
