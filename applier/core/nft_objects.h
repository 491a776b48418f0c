// What changed between two of kube-proxy's nft programs (nftables or fast-path
// transactions as knftables writes them, or `nft list` text), by Service and by
// object — not by packet behaviour: nft packet semantics are issue 16's. kube-proxy's
// per-service objects carry the Service in their names ("service-HASH-ns/name/tcp/http",
// "endpoint-HASH-ns/name/tcp/http__10.1.0.5/8080", "affinity-..."), and the elements of
// its no-endpoint maps in a comment ("ns/name:http"): a line that names one belongs to
// that Service port, an element of an address set (cluster-ips) to the Services whose
// dispatch elements have that address, anything else to no Service.
//
// Here, in the applier's core, because what a sync changes on a node is the applier's
// report (as drift's is); it reads text only, so it neither needs a back end nor makes
// the verifier depend on kube-proxy's naming.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kpc::applier {

struct NftServiceChange {
  std::string service;  ///< "ns/name:port" ("ns/name" for an unnamed port); "" = objects of no Service
  bool added = false;    ///< the Service port has no object in `before`
  bool removed = false;  ///< ... no object in `after`
  std::vector<std::string> items;  ///< "endpoint removed 10.244.2.6:8080", "service-ips element 10.96.0.10 . tcp . 80 added"
  size_t rules_added = 0, rules_removed = 0;
  size_t lines_added = 0, lines_removed = 0;
};

/// Every Service port (then the objects of no Service) whose lines differ, by name.
std::vector<NftServiceChange> nft_object_changes(std::string_view before, std::string_view after);

/// The change in words, at most max_items items ("and N more"): "endpoint removed
/// 10.244.2.6:8080; rules +0 -2", "Service port added (2 endpoints, 4 chains, 3 map/set elements, 9 rules)".
std::string nft_change_words(const NftServiceChange& c, size_t max_items = 6);

}  // namespace kpc::applier
