// kube-proxy's IPVS sync from what the node has (issue 17 §2): the change program that brings
// a node's IPVS table and KUBE-* ipsets to the full program's, as kube-proxy's proxier
// (pkg/proxy/ipvs/proxier.go syncService/syncEndpoint/cleanLegacyService) and its graceful
// termination manager (graceful_termination.go) would make it:
//   virtual servers: missing -> -A; scheduler, persistence or flags differ -> -E; not wanted
//     (same family) -> -D, with their real servers;
//   real servers: missing -> -a; present with another weight or forwarding -> -e; present at
//     weight 0 (draining) and wanted again -> -d then -a (MoveRSOutofGracefulDeleteList);
//     not wanted: TCP with live connections (or counts not read) -> -e weight 0, kept
//     (draining); TCP with 0 connections, UDP and SCTP -> -d at once; already draining ->
//     -d once its connections reach 0, else kept;
//   ipsets: missing sets created (-exist), then entries the node lacks added, entries the
//     program does not have deleted.
// The prior state is the compiler's own input type: the tool layer converts what the
// verifier's readers read (ipvsadm -S -n, ipvsadm -Ln, ipset save) into it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/ipvs/program.h"

namespace kpc::ipvs {

struct PriorRealServer {
  IPAddr address;
  uint16_t port = 0;
  uint32_t weight = 1;
  bool masquerade = true;
  std::optional<uint64_t> connections;  ///< ActiveConn + InActConn; nullopt: not read (treated as live)
  std::optional<uint64_t> active, inactive;  ///< the two columns, for reports (kpc ipvs drain-plan); nullopt: not read
};

struct PriorVirtualServer {
  Protocol protocol = Protocol::TCP;
  IPAddr address;
  uint16_t port = 0;
  std::string scheduler;
  bool persistent = false;
  uint32_t timeout = 0;
  std::string flags;  ///< -b's argument ("mh-port"), "" without
  std::vector<PriorRealServer> real_servers;
};

struct PriorSet {
  std::string name, type;            ///< as `ipset save` names them ("hash:ip,port")
  std::vector<std::string> entries;  ///< as `ipset save` prints them
};

struct PriorState {
  std::vector<PriorVirtualServer> virtual_servers;
  std::optional<std::vector<PriorSet>> sets;  ///< nullopt: no ipset save given (the sets are written whole)
};

struct SyncStats {
  size_t vs_added = 0, vs_edited = 0, vs_deleted = 0;
  size_t rs_added = 0, rs_edited = 0, rs_deleted = 0, rs_readded = 0;
  size_t rs_draining = 0;  ///< real servers left at weight 0 (newly or still draining)
  size_t sets_created = 0, entries_added = 0, entries_deleted = 0;
};

/// What the sync does to a real server of the node that the program no longer wants, or that
/// comes back while draining (what `kpc ipvs drain-plan` reports, compiler/ipvs/drain_plan.h).
enum class RsFate : uint8_t {
  Draining,                  ///< TCP, live (or unknown) counts: set to weight 0 now, kept
  StillDraining,             ///< already at weight 0 with live (or unknown) counts: kept
  DeletedIdle,               ///< TCP with 0 connections: -d
  DeletedAtOnce,             ///< UDP or SCTP: -d whatever its counts
  Readded,                   ///< wanted again while draining: -d then -a (its connections lose their server)
  DeletedWithVirtualServer,  ///< its virtual server is deleted (-D)
};
const char* rs_fate_name(RsFate f);  ///< "draining", "still_draining", "deleted_idle", ...

struct RemovedRealServer {
  Protocol protocol = Protocol::TCP;
  IPAddr vs_address;
  uint16_t vs_port = 0;
  PriorRealServer server;  ///< as the node has it (weight, counts)
  RsFate fate = RsFate::Draining;
};

struct SyncResult {
  std::string ipvs_rules;   ///< `ipvsadm -R` change script
  std::string ipset_rules;  ///< `ipset restore` change script
  SyncStats stats;
  std::vector<RemovedRealServer> removed;  ///< in script order
  std::string error;  ///< non-empty: no program (a set of another type on the node)
};

/// The change program from `prior` to `full` (one family: `full.family`; the node's virtual
/// servers of the other family are left alone, as kube-proxy's cleanLegacyService does).
SyncResult sync_from_prior(const Program& full, const PriorState& prior);

}  // namespace kpc::ipvs
