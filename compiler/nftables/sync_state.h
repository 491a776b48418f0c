// What kube-proxy's nftables proxier keeps between syncs, and what it reads from the kernel
// at each sync (pkg/proxy/nftables/proxier.go: nftElementStorage, staleChains, flushed,
// syncedOnce, the chain and set listings). A partial transaction is a function of the new
// service ports *and* of this state, so the back end makes it explicit: the driver derives
// it from a prior snapshot, the incremental compiler carries it, a tool can fill it from a
// node's listing.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace kpc::nftables {

/// The six element containers kube-proxy mirrors in memory, in the order it cleans them up.
enum class Container : uint8_t { ClusterIPs, ServiceIPs, FirewallIPs, NoEndpointServices, NoEndpointNodePorts, ServiceNodePorts };
constexpr size_t kContainers = 6;
const char* container_name(Container c);  ///< "cluster-ips", "service-ips", ...
bool container_is_map(Container c);       ///< all but cluster-ips

/// nftElementStorage: key ("a . b . c") -> value ("goto chain", "drop", "" for sets).
using ElementMap = std::unordered_map<std::string, std::string>;

struct SyncState {
  bool flushed = false;      ///< the base chains were added and deleted once (first full sync of a process)
  bool synced_once = false;  ///< a sync ran: endpoint chains already in the kernel are no longer trusted as-is
  std::array<ElementMap, kContainers> elements;
  /// Per-service chains flushed because unused, with the time (ms) they were last flushed; a sync
  /// more than a second later deletes them, in a transaction of its own before the main one.
  std::map<std::string, int64_t> stale_chains;
  /// The kernel's table as the last successful transactions left it: what kube-proxy's
  /// `List(chain)` / `List(sets)` return at the next sync, unless a real listing is given.
  bool table_exists = false;
  std::set<std::string> kernel_chains;
  std::set<std::string> kernel_sets;

  ElementMap& of(Container c) { return elements[static_cast<size_t>(c)]; }
  const ElementMap& of(Container c) const { return elements[static_cast<size_t>(c)]; }
};

/// What the kernel holds, read by kube-proxy at a sync; each part unset = as SyncState says.
struct KernelListing {
  std::optional<std::set<std::string>> chains;
  std::optional<std::set<std::string>> sets;
  /// Elements of the six containers (read by a full sync's readOrReset).
  std::optional<std::array<ElementMap, kContainers>> elements;
};

}  // namespace kpc::nftables
