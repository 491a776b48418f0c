// KEP-4963 "Kube-proxy Services Acceleration": the FastPath controller's program. One table,
// `inet kube-proxy-fastpath`, beside whichever mode the node runs: a flowtable on the node's
// interfaces, three sets of the (protocol, address, port) and (protocol, NodePort) of Services
// with `spec.trafficHint: LongLived`, a prerouting chain that marks their packets (bit 0x8000)
// before DNAT, and a forward chain that offloads marked flows to the flowtable and clears the
// bit. See docs/fastpath.md for what offload changes for packets.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/model/objects.h"
#include "compiler/nftables/transaction.h"
#include "compiler/support/diag.h"

namespace kpc::fastpath {

constexpr const char* kTable = "kube-proxy-fastpath";
constexpr uint32_t kMarkBit = 15;  ///< 0x8000, the KEP's fast-path mark

/// What the table must hold for a snapshot.
struct Desired {
  std::vector<std::string> devices;  ///< flowtable devices: the node's interfaces but lo, in order
  std::set<std::string> nodeports;   ///< "tcp . 31147"
  std::set<std::string> ip4_ports;   ///< "tcp . 10.96.128.18 . 5001"
  std::set<std::string> ip6_ports;   ///< "tcp . fd00:10:96::c284 . 5001"
};

/// The desired contents, or nullopt with located errors: the node's interfaces unknown or not
/// writable in nft, or kube-proxy's masquerade bit (of the configured mode) equal to the
/// fast-path bit.
std::optional<Desired> desired_state(const Snapshot& snap, DiagSink& diags);

/// The full transaction (table, flowtable, sets flushed and filled, chains flushed and
/// written); with `prior`, the incremental one from prior's contents (element adds and
/// deletes; the flowtable replaced when its devices change; nothing when nothing changed).
nftables::Transaction fastpath_transaction(const Desired& next, const Desired* prior);

}  // namespace kpc::fastpath
