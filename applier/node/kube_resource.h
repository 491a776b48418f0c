// What a reflector (client-go's ListAndWatch) keeps for one resource — Services,
// EndpointSlices or this Node — and how a list response and each watch-stream line change it.
// Pure bookkeeping, no I/O: kube_api_source.cpp moves the bytes, this decides what they mean.
//
//  * a list gives every object and the list's resourceVersion; objects held before and absent
//    now were deleted while we were not watching (a relist after 410 Gone) and become DELETED
//    events; objects whose resourceVersion did not change produce no event;
//  * a watch line is one event {"type", "object"}: ADDED/MODIFIED/DELETED change the held set
//    (a replay of an event already applied — same resourceVersion — is dropped), BOOKMARK only
//    advances the resourceVersion, ERROR with code 410 means "relist";
//  * every object is decoded by the model's decoders (decode_watch_object), so the API source
//    validates exactly as a snapshot file does; an invalid object is reported and skipped
//    (the held version, if any, stays), never fatal.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "applier/node/watch_events.h"

namespace kpc::applier {

/// One of the three resources kube-proxy watches.
struct KubeResource {
  WatchEvent::Kind kind = WatchEvent::Kind::Service;
  std::string path;            ///< "/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices", "/api/v1/nodes"
  std::string field_selector;  ///< "metadata.name=NODE" for this Node
  /// kube-proxy's informers leave out Services and EndpointSlices of other proxies and of
  /// headless Services on the server side (the compiler ignores them too).
  std::string label_selector;
};
inline constexpr const char* kKubeProxyLabelSelector =
    "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless";
KubeResource services_resource();
KubeResource endpoint_slices_resource();
KubeResource node_resource(const std::string& node_name);
/// networking.k8s.io/v1 ServiceCIDRs (the nftables mode drops traffic to their unallocated IPs).
KubeResource service_cidrs_resource();

class ResourceState {
 public:
  explicit ResourceState(WatchEvent::Kind kind) : kind_(kind) {}

  /// A complete list (all pages concatenated by the caller into `items` order): the events
  /// that bring the held set to the list, and the list's resourceVersion becomes current.
  /// Each page is one JSON body; call begin_list, page per body, end_list.
  void begin_list();
  /// False with *error when the body is not a list of this kind (the list must be retried);
  /// *continue_token is the next page's token ("" at the end). Invalid items go to *errors.
  bool list_page(std::string_view body, const std::string& source_name, std::string* continue_token,
                 std::vector<std::string>* errors, std::string* error);
  /// Ends the list: the events (updates, then deletions of objects the list lacks).
  std::vector<WatchEvent> end_list();

  enum class LineResult { Ok, Gone, Error };
  /// One line of a watch stream. Ok: *events got 0 or 1 event (bookmarks give none);
  /// Gone: the server said 410 (relist); Error: the line is malformed or an ERROR event
  /// other than 410 (*error says what; the stream goes on).
  LineResult watch_line(std::string_view line, const std::string& source_name, std::vector<WatchEvent>* events,
                        std::string* error);

  const std::string& resource_version() const { return rv_; }
  bool listed() const { return listed_; }
  size_t held() const { return held_.size(); }
  uint64_t bookmarks() const { return bookmarks_; }
  uint64_t replays_dropped() const { return replays_; }

 private:
  using Key = std::pair<std::string, std::string>;
  WatchEvent::Kind kind_;
  std::string rv_;
  bool listed_ = false;
  std::map<Key, std::string> held_;  ///< object -> its resourceVersion ("" when unknown)
  // during a list
  std::map<Key, std::string> seen_;
  std::vector<WatchEvent> list_events_;
  std::string list_rv_;
  uint64_t bookmarks_ = 0, replays_ = 0;
};

}  // namespace kpc::applier
