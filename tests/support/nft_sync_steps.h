// kube-proxy's own syncs of a multi-step kp-nft fixture, replayed through kpc's nftables back end
// sync by sync as the proxier decides (a full sync first, then partial ones when it may): for each
// partial sync, the node's state before it (the nft model's), the partial transaction and the full
// transaction of the same moment. The correct partials that the nft verifier's mutation tests
// start from (tests/golden/nft_verify_mutations_test.cpp against the model,
// tests/kernel/nft_verify_mutations_kernel_test.cpp against the real nft).
#pragma once

#include <string>
#include <vector>

#include "verifier/nft/nft.h"

namespace kpc::test {

struct NftSyncStep {
  verifier::nft::NftState prior;  ///< the node after the steps before (model)
  std::string partial, full;      ///< nft -f input: the sync kube-proxy makes, and a forced full one
  std::string label;              ///< "<fixture> step N"
  std::vector<std::string> applied_before;  ///< the transactions that built `prior`, in order
};

/// One mutant of a program: one line deleted.
struct LineDeleted {
  std::string text;   ///< the program without the line
  std::string where;  ///< "<label>, line N deleted: <the line>"
};
/// Every mutant of `program` with one non-empty, non-comment line deleted.
std::vector<LineDeleted> one_line_deleted(const std::string& program, const std::string& label);

/// The partial syncs of fixtures/<fixture> (IPv4). A step that does not compile or apply is a
/// test failure (EXPECT) and ends the list.
std::vector<NftSyncStep> nft_sync_steps(const std::string& fixture);

}  // namespace kpc::test
