// Which real server IPVS's scheduler gives a new connection, as an exact distribution over the
// real servers of one virtual server (the per-connection choice depends on kernel state the
// program does not fix: the round-robin position, counters; the distribution is over that).
//
//   rr    equal shares among the real servers with weight > 0 (ip_vs_rr.c skips weight-0 and
//         overloaded destinations; one full round gives each the next connection once);
//   wrr   weight / sum of weights (ip_vs_wrr.c: over one period of the weighted round, each
//         server gets exactly its weight's number of connections);
//   fo    the first server of the highest weight (ip_vs_fo.c: weighted failover, deterministic);
//   others (lc, wlc, sed, nq, sh, mh, dh, lblc, lblcr, twos, ovf): the choice depends on the
//         servers' connection counts or on a hash of the client, which the program does not
//         give: Unknown, naming the candidates (weight > 0) — unless equal_shares_for_others,
//         which gives those candidates weight-proportional shares and says so (an assumption:
//         idle servers / uniformly spread clients).
// No server with weight > 0: no destination (the caller applies ip_vs_leave).
#pragma once

#include <string>
#include <vector>

#include "verifier/ipvs/ipvsadm.h"
#include "verifier/nft_trace/fraction.h"

namespace kpc::verifier::ipvs_trace {

using nft_trace::Fraction;

struct Share {
  const ipvs::RealServer* server = nullptr;
  Fraction probability;
};

struct Schedule {
  std::vector<Share> shares;  ///< empty: no destination (or unknown, see why)
  std::string why;            ///< non-empty: not decided (the scheduler is not modelled)
  std::string note;           ///< how the shares were obtained, for the report
};

Schedule schedule(const ipvs::VirtualServer& vs, bool equal_shares_for_others);

}  // namespace kpc::verifier::ipvs_trace
