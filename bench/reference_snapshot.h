// The reference cluster of every benchmark (10,000 Services / 100,000 endpoints, ClusterShape's
// defaults), generated once per process and loaded once.
#pragma once

#include <string>

#include "compiler/model/objects.h"

namespace kpc::bench {

/// The synthetic cluster as kubectl JSON (json) or YAML text.
const std::string& reference_cluster_text(bool json);
/// That cluster, loaded and validated.
const Snapshot& reference_snapshot();

}  // namespace kpc::bench
