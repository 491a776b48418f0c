// The one change the benchmarks measure against the synthetic cluster: Service svc-42
// gains an endpoint (10.200.0.1), as a scale-up would. Shared by the compile and
// verifier benchmarks so that their partial programs are the same.
#pragma once

#include "compiler/model/objects.h"

namespace kpc::bench {

/// The EndpointSlice that changes.
inline constexpr const char* kChangedSlice = "svc-42-abcde";

/// The change on that slice: a copy of its first endpoint at 10.200.0.1.
inline void add_one_endpoint(EndpointSlice& slice) {
  Endpoint ep = slice.endpoints[0];
  ep.addresses = {*IPAddr::parse("10.200.0.1")};
  slice.endpoints.push_back(ep);
}

/// The change on a whole snapshot.
inline void add_one_endpoint(Snapshot& snap) {
  for (auto& sl : snap.slices)
    if (sl.meta.name == kChangedSlice) add_one_endpoint(sl);
}

}  // namespace kpc::bench
