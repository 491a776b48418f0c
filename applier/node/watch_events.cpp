#include "applier/node/watch_events.h"

#include "compiler/model/decode.h"
#include "compiler/model/doc.h"

namespace kpc::applier {

const char* watch_event_type_name(WatchEvent::Type t) {
  switch (t) {
    case WatchEvent::Type::Added: return "ADDED";
    case WatchEvent::Type::Modified: return "MODIFIED";
    case WatchEvent::Type::Deleted: return "DELETED";
  }
  return "?";
}
const char* watch_event_kind_name(WatchEvent::Kind k) {
  switch (k) {
    case WatchEvent::Kind::Service: return "Service";
    case WatchEvent::Kind::EndpointSlice: return "EndpointSlice";
    case WatchEvent::Kind::Node: return "Node";
    case WatchEvent::Kind::ServiceCIDR: return "ServiceCIDR";
  }
  return "?";
}

static std::string first_error(const DiagSink& d, const SourceManager& sm) {
  for (const auto& x : d.all())
    if (!is_warning(x.code)) return render(x, sm);
  return d.all().empty() ? "invalid" : render(d.all().front(), sm);
}

bool decode_watch_event(std::string_view json, WatchEvent* out, bool* skipped, std::string* error) {
  *skipped = false;
  SourceManager sm;
  uint32_t f = sm.add("watch-event", std::string(json));
  DocNode doc;
  DiagSink diags;
  if (!read_json(sm, f, ReadLimits{}, &doc, diags)) {
    *error = first_error(diags, sm);
    return false;
  }
  if (!doc.is_map()) return *error = "not a JSON object", false;
  const DocNode* type = doc.get("type");
  if (!type || type->kind != DocNode::Kind::String) return *error = "no string `type`", false;
  const std::string& t = type->text;
  if (t == "BOOKMARK") return *skipped = true, true;
  if (t == "ADDED") out->type = WatchEvent::Type::Added;
  else if (t == "MODIFIED") out->type = WatchEvent::Type::Modified;
  else if (t == "DELETED") out->type = WatchEvent::Type::Deleted;
  else if (t == "ERROR") {
    const DocNode* o = doc.get("object");
    const DocNode* m = o ? o->get("message") : nullptr;
    *error = "the API server sent an ERROR event" + (m && m->kind == DocNode::Kind::String ? ": " + m->text : "");
    return false;
  } else
    return *error = "unknown event type \"" + t.substr(0, 40) + "\"", false;
  const DocNode* obj = doc.get("object");
  if (!obj || !obj->is_map()) return *error = "no `object`", false;
  const DocNode* kind = obj->get("kind");
  const DocNode* api = obj->get("apiVersion");
  if (!kind || kind->kind != DocNode::Kind::String || !api || api->kind != DocNode::Kind::String)
    return *error = "object has no string `apiVersion` and `kind`", false;
  const std::string& k = kind->text;
  std::string want_api;
  if (k == "Service") out->kind = WatchEvent::Kind::Service, want_api = "v1";
  else if (k == "EndpointSlice") out->kind = WatchEvent::Kind::EndpointSlice, want_api = "discovery.k8s.io/v1";
  else if (k == "Node") out->kind = WatchEvent::Kind::Node, want_api = "v1";
  else if (k == "ServiceCIDR") out->kind = WatchEvent::Kind::ServiceCIDR, want_api = "networking.k8s.io/v1";
  else return *skipped = true, true;
  if (api->text != want_api)
    return *error = k + ": apiVersion \"" + api->text.substr(0, 60) + "\" is not supported; kpc reads " + want_api, false;
  if (out->type == WatchEvent::Type::Deleted) {
    // Only the identity matters (the object is the last state the API server had).
    const DocNode* meta = obj->get("metadata");
    const DocNode* name = meta ? meta->get("name") : nullptr;
    const DocNode* ns = meta ? meta->get("namespace") : nullptr;
    if (!name || name->kind != DocNode::Kind::String || name->text.empty())
      return *error = k + ": DELETED event without metadata.name", false;
    out->name = name->text;
    if (!out->cluster_scoped()) {
      if (!ns || ns->kind != DocNode::Kind::String || ns->text.empty())
        return *error = k + " " + name->text + ": DELETED event without metadata.namespace", false;
      out->ns = ns->text;
    }
    return true;
  }
  return decode_watch_object(*obj, sm, out, error);
}

bool decode_watch_object(const DocNode& obj, const SourceManager& sm, WatchEvent* out, std::string* error) {
  DiagSink diags;
  bool ok = false;
  switch (out->kind) {
    case WatchEvent::Kind::Service: {
      Service s;
      ok = decode_service(obj, &s, diags);
      if (ok) out->ns = s.meta.ns, out->name = s.meta.name, out->service = std::move(s);
      break;
    }
    case WatchEvent::Kind::EndpointSlice: {
      EndpointSlice s;
      ok = decode_endpoint_slice(obj, &s, diags);
      if (ok) out->ns = s.meta.ns, out->name = s.meta.name, out->slice = std::move(s);
      break;
    }
    case WatchEvent::Kind::Node: {
      Node n;
      ok = decode_node(obj, &n, diags);
      if (ok) out->name = n.meta.name, out->node = std::move(n);
      break;
    }
    case WatchEvent::Kind::ServiceCIDR: {
      ServiceCIDR c;
      ok = decode_service_cidr(obj, &c, diags);
      if (ok) out->name = c.meta.name, out->service_cidr = std::move(c);
      break;
    }
  }
  if (!ok) *error = first_error(diags, sm);
  return ok;
}

void WatchStreamDecoder::value(std::string_view text, std::vector<WatchEvent>* events,
                               std::vector<std::string>* errors) {
  ++seen_;
  WatchEvent e;
  bool skipped = false;
  std::string err;
  if (!decode_watch_event(text, &e, &skipped, &err)) {
    errors->push_back("event " + std::to_string(seen_) + ": " + err);
    return;
  }
  if (skipped) {
    ++skipped_;
    return;
  }
  events->push_back(std::move(e));
}

void WatchStreamDecoder::feed(std::string_view bytes, std::vector<WatchEvent>* events,
                              std::vector<std::string>* errors) {
  buf_.append(bytes);
  size_t i = scan_;
  size_t start = 0;
  while (i < buf_.size()) {
    char c = buf_[i];
    if (discarding_) {
      // Skip to the end of a garbage line, then look for the next value.
      if (c == '\n') discarding_ = false;
      start = ++i;
      continue;
    }
    if (!started_) {
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        start = ++i;
        continue;
      }
      if (c != '{') {
        ++seen_;
        errors->push_back("event " + std::to_string(seen_) + ": expected a JSON object, got '" +
                          std::string(1, c) + "': skipped to the end of the line");
        discarding_ = true;
        continue;
      }
      started_ = true;
      start = i;
      depth_ = 0;
    }
    if (in_string_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') in_string_ = false;
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (--depth_ == 0) {
        value(std::string_view(buf_).substr(start, i + 1 - start), events, errors);
        started_ = false;
        start = i + 1;
      }
    }
    ++i;
    if (started_ && i - start > max_) {
      ++seen_;
      errors->push_back("event " + std::to_string(seen_) + ": larger than " + std::to_string(max_) +
                        " bytes: skipped to the end of the line");
      started_ = in_string_ = escape_ = false;
      discarding_ = true;
      start = i;
    }
  }
  buf_.erase(0, start);
  scan_ = buf_.size();
}

void WatchStreamDecoder::finish(std::vector<std::string>* errors) {
  if (started_ && !buf_.empty()) {
    ++seen_;
    errors->push_back("event " + std::to_string(seen_) + ": the stream ended inside an event (" +
                      std::to_string(buf_.size()) + " bytes): skipped");
  }
  buf_.clear();
  scan_ = 0;
  started_ = in_string_ = escape_ = discarding_ = false;
}

}  // namespace kpc::applier
