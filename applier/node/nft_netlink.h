// nftables in-process without nft's cache: a transaction kpc wrote, encoded by
// nft_netlink_encode.h into the netlink batch nft would send, and sent on a netlink socket of the
// calling thread (so in its network namespace, as libnftables' is). At 10,000 Services nft spends
// most of a small partial's time dumping the kernel's 130,000 chains before it sends anything; this
// sends the batch at once (docs/performance.md "Session 12").
//
// Three outcomes: applied; unsupported (a line outside the encoder's vocabulary, or a set the
// kernel does not have: nothing was sent — the caller hands the program to libnftables); refused
// (the kernel rejected the batch, which is atomic: nothing changed — the caller runs the program
// through libnftables to report nft's own error text).
#pragma once

#include <cstddef>
#include <string>

namespace kpc::applier {

enum class NetlinkOutcome { Applied, Unsupported, Refused };

struct NetlinkApplyResult {
  NetlinkOutcome outcome = NetlinkOutcome::Unsupported;
  /// Unsupported: "line N: why"; refused: "line N: <strerror>" (or what went wrong with the socket).
  std::string detail;
  int error = 0;         ///< refused: the kernel's errno
  size_t messages = 0;   ///< in the batch (begin and end not counted)
  size_t set_queries = 0;  ///< GETSETs asked for sets the program used but did not declare
};

/// `nft -f -` of program, as one netlink batch. Root (CAP_NET_ADMIN) in the thread's namespace.
NetlinkApplyResult nft_netlink_apply(const std::string& program);

const char* netlink_outcome_name(NetlinkOutcome o);  ///< "applied", "unsupported", "refused"

}  // namespace kpc::applier
