// The `--watch -` source: a stream of watch events exactly as
//   kubectl get services,endpointslices,nodes -A --watch --output-watch-events -o json
// prints them: one JSON object per event, {"type": "ADDED"|"MODIFIED"|"DELETED", "object": {...}},
// concatenated (pretty-printed over many lines, or one a line). Each object is decoded with the
// model's own decoders (compiler/model/decode.h), so it is validated as a snapshot's would be.
// A malformed event (bad JSON, an unknown type, an invalid object) is reported and skipped;
// the stream goes on with the next one. BOOKMARK events and kinds kpc does not read are skipped
// silently (counted).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/model/doc.h"
#include "compiler/model/objects.h"

namespace kpc::applier {

struct WatchEvent {
  enum class Type { Added, Modified, Deleted };
  enum class Kind { Service, EndpointSlice, Node, ServiceCIDR };
  Type type = Type::Added;
  Kind kind = Kind::Service;
  std::string ns, name;
  // The decoded object (ADDED/MODIFIED; for DELETED only ns/name are used).
  std::optional<Service> service;
  std::optional<EndpointSlice> slice;
  std::optional<Node> node;
  std::optional<ServiceCIDR> service_cidr;
  /// Cluster-scoped kinds have no namespace.
  bool cluster_scoped() const { return kind == Kind::Node || kind == Kind::ServiceCIDR; }
};
const char* watch_event_type_name(WatchEvent::Type t);
const char* watch_event_kind_name(WatchEvent::Kind k);

class WatchStreamDecoder {
 public:
  /// Largest single event accepted (bytes); a larger one is skipped as malformed.
  explicit WatchStreamDecoder(size_t max_event_bytes = size_t{64} << 20) : max_(max_event_bytes) {}

  /// Feeds bytes; complete events are appended to *events, problems (one line each,
  /// "event N: ...") to *errors.
  void feed(std::string_view bytes, std::vector<WatchEvent>* events, std::vector<std::string>* errors);
  /// End of stream: a partial event left over is reported.
  void finish(std::vector<std::string>* errors);

  size_t events_seen() const { return seen_; }
  size_t skipped() const { return skipped_; }  ///< bookmarks and kinds not read

 private:
  void value(std::string_view text, std::vector<WatchEvent>* events, std::vector<std::string>* errors);
  std::string buf_;
  size_t scan_ = 0;  ///< bytes of buf_ already scanned for the current value
  int depth_ = 0;
  bool in_string_ = false, escape_ = false, started_ = false;
  bool discarding_ = false;  ///< skipping a garbage line
  size_t max_;
  size_t seen_ = 0, skipped_ = 0;
};

/// Decodes one event's JSON text (tests). False with *error on a malformed event; true with
/// *skipped set for bookmarks and kinds not read.
bool decode_watch_event(std::string_view json, WatchEvent* out, bool* skipped, std::string* error);

/// Decodes one object of kind out->kind (a Service, EndpointSlice or Node as the API server
/// sends it, in a watch event or a list's items) with the model's decoders, filling out's
/// ns/name and object. False with *error (the first located error, rendered with sm).
bool decode_watch_object(const DocNode& obj, const SourceManager& sm, WatchEvent* out, std::string* error);

}  // namespace kpc::applier
