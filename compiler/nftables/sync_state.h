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
#include <string_view>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <tuple>
#include <utility>
#include <vector>

namespace kpc::nftables {

/// The six element containers kube-proxy mirrors in memory, in the order it cleans them up.
enum class Container : uint8_t { ClusterIPs, ServiceIPs, FirewallIPs, NoEndpointServices, NoEndpointNodePorts, ServiceNodePorts };
constexpr size_t kContainers = 6;
const char* container_name(Container c);  ///< "cluster-ips", "service-ips", ...
bool container_is_map(Container c);       ///< all but cluster-ips

/// Hash and equality that also take string_views (lookups without a copy).
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
using NameSet = std::unordered_set<std::string, TextHash, std::equal_to<>>;

/// nftElementStorage: key ("a . b . c") -> value ("goto chain", "drop", "" for sets).
using ElementMap = std::unordered_map<std::string, std::string, TextHash, std::equal_to<>>;

/// What one Service contributed to the last sync: the element keys it ensured, its chains and
/// affinity sets. Kept so that a sync can visit only the Services that changed (the incremental
/// compiler) and still find every element, chain and set that became unused.
struct Footprint {
  std::vector<std::pair<Container, std::string>> elements;
  std::vector<std::string> chains;
  std::vector<std::string> affinity_sets;
  size_t endpoints = 0;
  size_t no_local_internal = 0, no_local_external = 0;
};

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
  NameSet kernel_chains;
  NameSet kernel_sets;

  /// Per Service ("ns/name"), its footprint in the last sync (kept with track_kernel).
  std::map<std::string, Footprint, std::less<>> footprints;
  /// Element key -> the Service that ensured it (any container). A key two Services share
  /// makes their element operations depend on each other: such syncs visit every Service.
  std::unordered_map<std::string, std::string, TextHash, std::equal_to<>> key_owner;
  size_t shared_keys = 0;

  /// How to take the kernel view back to before the last sync, should its transaction fail
  /// (the kernel rolls a failed transaction back; kube-proxy then re-reads it): the elements it
  /// changed with their former values, the chains and sets it created or deleted.
  struct Undo {
    std::vector<std::tuple<Container, std::string, std::optional<std::string>>> elements;
    std::vector<std::string> added_chains, added_sets, deleted_sets;
    bool created_table = false;
  } undo;

  ElementMap& of(Container c) { return elements[static_cast<size_t>(c)]; }
  const ElementMap& of(Container c) const { return elements[static_cast<size_t>(c)]; }
};

/// What the kernel holds, read by kube-proxy at a sync; each part unset = as SyncState says.
struct KernelListing {
  std::optional<NameSet> chains;
  std::optional<NameSet> sets;
  /// Elements of the six containers (read by a full sync's readOrReset).
  std::optional<std::array<ElementMap, kContainers>> elements;
};

}  // namespace kpc::nftables
