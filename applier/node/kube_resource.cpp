#include "applier/node/kube_resource.h"

#include "compiler/model/doc.h"

namespace kpc::applier {

KubeResource services_resource() { return {WatchEvent::Kind::Service, "/api/v1/services", "", kKubeProxyLabelSelector}; }
KubeResource endpoint_slices_resource() {
  return {WatchEvent::Kind::EndpointSlice, "/apis/discovery.k8s.io/v1/endpointslices", "", kKubeProxyLabelSelector};
}
KubeResource node_resource(const std::string& node_name) {
  return {WatchEvent::Kind::Node, "/api/v1/nodes", "metadata.name=" + node_name, ""};
}
KubeResource service_cidrs_resource() {
  return {WatchEvent::Kind::ServiceCIDR, "/apis/networking.k8s.io/v1/servicecidrs", "", ""};
}

namespace {

const char* api_version_of(WatchEvent::Kind k) {
  return k == WatchEvent::Kind::EndpointSlice ? "discovery.k8s.io/v1"
         : k == WatchEvent::Kind::ServiceCIDR ? "networking.k8s.io/v1"
                                              : "v1";
}

bool cluster_scoped(WatchEvent::Kind k) { return k == WatchEvent::Kind::Node || k == WatchEvent::Kind::ServiceCIDR; }

const DocNode* string_at(const DocNode& n, std::string_view a, std::string_view b) {
  const DocNode* x = n.get(a);
  x = x ? x->get(b) : nullptr;
  return x && x->kind == DocNode::Kind::String ? x : nullptr;
}

std::string string_or_empty(const DocNode* n) { return n ? n->text : std::string(); }

// The object's identity as the API server keys it (namespace "" for Nodes); false when absent.
bool object_key(const DocNode& obj, WatchEvent::Kind kind, std::pair<std::string, std::string>* key) {
  const DocNode* name = string_at(obj, "metadata", "name");
  const DocNode* ns = string_at(obj, "metadata", "namespace");
  if (!name || name->text.empty()) return false;
  if (!cluster_scoped(kind) && (!ns || ns->text.empty())) return false;
  *key = {cluster_scoped(kind) ? "" : ns->text, name->text};
  return true;
}

std::string key_text(const std::pair<std::string, std::string>& k) {
  return k.first.empty() ? k.second : k.first + "/" + k.second;
}

// kind/apiVersion, when the object carries them (watch events do, list items need not).
bool check_kind(const DocNode& obj, WatchEvent::Kind kind, std::string* error) {
  const DocNode* k = obj.get("kind");
  const DocNode* a = obj.get("apiVersion");
  if (k && (k->kind != DocNode::Kind::String || k->text != watch_event_kind_name(kind)))
    return *error = std::string("expected kind ") + watch_event_kind_name(kind), false;
  if (a && (a->kind != DocNode::Kind::String || a->text != api_version_of(kind)))
    return *error = std::string("expected apiVersion ") + api_version_of(kind), false;
  return true;
}

std::string parse_error(const DiagSink& d, const SourceManager& sm) {
  return d.all().empty() ? "not JSON" : render(d.all().front(), sm);
}

}  // namespace

void ResourceState::begin_list() {
  seen_.clear();
  list_events_.clear();
  list_rv_.clear();
}

bool ResourceState::list_page(std::string_view body, const std::string& source_name, std::string* continue_token,
                              std::vector<std::string>* errors, std::string* error) {
  continue_token->clear();
  SourceManager sm;
  uint32_t f = sm.add(source_name, std::string(body));
  DocNode doc;
  DiagSink diags;
  if (!read_json(sm, f, ReadLimits{}, &doc, diags)) return *error = parse_error(diags, sm), false;
  const DocNode* items = doc.get("items");
  if (!doc.is_map() || !items || !(items->is_seq() || items->is_null()))
    return *error = source_name + ": not a list (no `items`)", false;
  if (const DocNode* rv = string_at(doc, "metadata", "resourceVersion")) list_rv_ = rv->text;
  if (const DocNode* c = string_at(doc, "metadata", "continue")) *continue_token = c->text;
  for (const DocNode& item : items->items) {
    std::pair<std::string, std::string> key;
    bool has_key = item.is_map() && object_key(item, kind_, &key);
    std::string rv = string_or_empty(string_at(item, "metadata", "resourceVersion"));
    WatchEvent e;
    e.kind = kind_;
    e.type = WatchEvent::Type::Added;
    std::string why;
    if (!has_key) {
      errors->push_back(render(Diagnostic{DiagCode::MissingKind, item.pos, watch_event_kind_name(kind_), "metadata",
                                          "list item without metadata.name/namespace: skipped"},
                               sm));
      continue;
    }
    auto held = held_.find(key);
    if (!check_kind(item, kind_, &why) || !decode_watch_object(item, sm, &e, &why)) {
      // Invalid: skipped; a version held before stays (it is still in the cluster).
      errors->push_back(std::string(watch_event_kind_name(kind_)) + " " + key_text(key) + ": " + why + ": skipped");
      if (held != held_.end()) seen_[key] = held->second;
      continue;
    }
    seen_[key] = rv;
    if (held != held_.end() && !rv.empty() && held->second == rv) continue;  // unchanged
    if (held != held_.end()) e.type = WatchEvent::Type::Modified;
    list_events_.push_back(std::move(e));
  }
  return true;
}

std::vector<WatchEvent> ResourceState::end_list() {
  std::vector<WatchEvent> out = std::move(list_events_);
  for (const auto& [key, rv] : held_)
    if (!seen_.count(key)) {
      WatchEvent d;
      d.kind = kind_;
      d.type = WatchEvent::Type::Deleted;
      d.ns = key.first;
      d.name = key.second;
      out.push_back(std::move(d));
    }
  held_ = std::move(seen_);
  seen_.clear();
  list_events_.clear();
  rv_ = list_rv_;
  listed_ = true;
  return out;
}

ResourceState::LineResult ResourceState::watch_line(std::string_view line, const std::string& source_name,
                                                    std::vector<WatchEvent>* events, std::string* error) {
  SourceManager sm;
  uint32_t f = sm.add(source_name, std::string(line));
  DocNode doc;
  DiagSink diags;
  if (!read_json(sm, f, ReadLimits{}, &doc, diags)) return *error = parse_error(diags, sm), LineResult::Error;
  const DocNode* type = doc.get("type");
  const DocNode* obj = doc.get("object");
  if (!doc.is_map() || !type || type->kind != DocNode::Kind::String || !obj || !obj->is_map())
    return *error = source_name + ": not a watch event ({\"type\", \"object\"})", LineResult::Error;
  const std::string& t = type->text;
  if (t == "ERROR") {
    // A metav1.Status: code 410 (Expired/Gone) means our resourceVersion is too old.
    const DocNode* code = obj->get("code");
    const DocNode* msg = obj->get("message");
    *error = "the API server sent an ERROR event";
    if (code && code->kind == DocNode::Kind::Int) *error += " (code " + code->text + ")";
    if (msg && msg->kind == DocNode::Kind::String) *error += ": " + msg->text.substr(0, 300);
    return code && code->text == "410" ? LineResult::Gone : LineResult::Error;
  }
  std::string rv = string_or_empty(string_at(*obj, "metadata", "resourceVersion"));
  if (t == "BOOKMARK") {
    // Only metadata.resourceVersion is meaningful in a bookmark's object.
    if (!rv.empty()) rv_ = rv, ++bookmarks_;
    return LineResult::Ok;
  }
  WatchEvent e;
  e.kind = kind_;
  if (t == "ADDED") e.type = WatchEvent::Type::Added;
  else if (t == "MODIFIED") e.type = WatchEvent::Type::Modified;
  else if (t == "DELETED") e.type = WatchEvent::Type::Deleted;
  else return *error = source_name + ": unknown event type \"" + t.substr(0, 40) + "\"", LineResult::Error;
  std::pair<std::string, std::string> key;
  if (!object_key(*obj, kind_, &key)) {
    if (!rv.empty()) rv_ = rv;
    return *error = source_name + ": " + t + " event without metadata.name/namespace: skipped", LineResult::Error;
  }
  // The resourceVersion advances whatever the object's fate: the event was seen.
  if (!rv.empty()) rv_ = rv;
  auto held = held_.find(key);
  if (e.type == WatchEvent::Type::Deleted) {
    if (held == held_.end()) return ++replays_, LineResult::Ok;  // never held (or already deleted)
    held_.erase(held);
    e.ns = key.first;
    e.name = key.second;
    events->push_back(std::move(e));
    return LineResult::Ok;
  }
  if (held != held_.end() && !rv.empty() && held->second == rv) return ++replays_, LineResult::Ok;
  std::string why;
  if (!check_kind(*obj, kind_, &why) || !decode_watch_object(*obj, sm, &e, &why)) {
    *error = std::string(watch_event_kind_name(kind_)) + " " + key_text(key) + ": " + why + ": skipped";
    return LineResult::Error;
  }
  held_[key] = rv;
  events->push_back(std::move(e));
  return LineResult::Ok;
}

}  // namespace kpc::applier
