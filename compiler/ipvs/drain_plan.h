// `kpc ipvs drain-plan` (issue 17 §2): per Service, what kube-proxy's next IPVS sync from the
// node's state leaves draining or deletes (taken from the sync itself, sync.h's
// SyncResult::removed: never recomputed), and what a client that reuses a source port hits
// under the node's kernel and IPVS sysctls - the failure cases of seed 004_098315146610bdd0.txt
// (conn_reuse_mode, conntrack, expire_nodest_conn; graceful termination) as concrete warnings.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/ipvs/node_plan.h"
#include "compiler/ipvs/sync.h"

namespace kpc::ipvs {

/// The IPVS sysctls that decide what a reused port hits. nullopt: the kernel has no such
/// sysctl (conn_reuse_mode before 4.1).
struct IpvsSysctls {
  std::optional<int> conn_reuse_mode;
  int expire_nodest_conn = 0;
  int conntrack = 0;
};

/// The values a node has after kube-proxy's start-up (the node plan for the kernel): the plan's
/// lines, the kernel's defaults for what it leaves alone (conn_reuse_mode 1 from 4.1 on).
IpvsSysctls sysctls_from_plan(const NodePlan& plan, const KernelVersion& kernel);
/// "net.ipv4.vs.conn_reuse_mode=0" (also expire_nodest_conn, conntrack): false with *error
/// set on another name or a value that is not a non-negative integer.
bool apply_sysctl(std::string_view assignment, IpvsSysctls* s, std::string* error);

struct DrainWarning {
  std::string kind;     ///< "reused_port_to_draining_server", "syn_dropped_1s", ...
  std::string message;  ///< what the client hits, with the servers and counts
  std::string seed;     ///< the seed's reasoning, one line
};

struct DrainServer {
  IPAddr address;
  uint16_t port = 0;
  uint32_t weight = 0;  ///< on the node now
  RsFate fate = RsFate::Draining;
  std::optional<uint64_t> active, inactive, connections;
};

struct DrainService {
  std::string service;  ///< "ns/name:port"; "" when the virtual server is deleted (no Service wants it)
  std::string kind;     ///< vs_kind_name, "" when deleted
  Protocol protocol = Protocol::TCP;
  IPAddr address;
  uint16_t port = 0;
  std::vector<DrainServer> servers;
  std::vector<DrainWarning> warnings;
};

struct DrainPlan {
  std::string kernel;  ///< the release the warnings are for
  IpvsSysctls sysctls;
  std::vector<DrainService> services;  ///< in the sync's order
  bool draining = false;               ///< a real server is left at weight 0
  size_t warnings = 0;
};

/// The plan for one sync's removals against the wanted program (for the Services' names).
DrainPlan drain_plan(const Program& full, const std::vector<RemovedRealServer>& removed, const KernelVersion& kernel,
                     const std::string& kernel_release, const IpvsSysctls& sysctls);

}  // namespace kpc::ipvs
