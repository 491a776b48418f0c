// Independent evidence for the nft verifier's mutation tests: does some sampled packet meet
// another fate in two nft states? Every destination atom of both states (nft_sym's universe)
// × the well-known ports and every port the listings name × TCP/UDP × from a pod, from outside
// and from the node, each traced by the concrete nft tracer (verifier/nft_trace) with the
// kernel's numgen shares on both sides.
#pragma once

#include <vector>

#include "compiler/support/net.h"
#include "verifier/nft/nft.h"

namespace kpc::test {

bool nft_fate_differs(const verifier::nft::NftState& a, const verifier::nft::NftState& b,
                      const std::vector<IPAddr>& local_addresses);

}  // namespace kpc::test
