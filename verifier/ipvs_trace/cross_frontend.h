// The IPVS concrete front end of the cross-back-end diff (verifier/cross/frontend.h): an IPVS
// program set (program_set.h) traced by the IPVS tracer (tracer.h), its outcomes in the
// mode-neutral spelling of verifier/cross/outcome.h. `kpc diff SNAPSHOT --from-backend ipvs
// --to-backend nftables` uses it.
//
// Mapping: IPVS's "ipvs-nat" route is the counterpart of the other modes' DNAT route - "forward"
// for a packet from a pod or outside, "output" for one from the node; ip_vs_leave's ICMP port
// unreachable is a plain reject (options ""); a persistent virtual server (-p) remembers the
// client (affinity) as the other modes' recent lists / affinity sets do.
#pragma once

#include <memory>
#include <vector>

#include "verifier/cross/frontend.h"
#include "verifier/ipvs_trace/program_set.h"

namespace kpc::verifier::ipvs_trace {

/// The front end over `set` (which must outlive it); local: the node's addresses besides
/// kube-ipvs0's (node.plan gives those).
std::unique_ptr<cross::ConcreteFrontend> make_ipvs_frontend(const ProgramSet& set, std::vector<IPAddr> local);

}  // namespace kpc::verifier::ipvs_trace
