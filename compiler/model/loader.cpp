#include "compiler/model/loader.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include "compiler/model/decode.h"
#include "compiler/model/names.h"
#include "compiler/support/input.h"
#include "compiler/support/text.h"

namespace kpc {
namespace fs = std::filesystem;

namespace {

struct KindInfo {
  const char* kind;
  const char* api_version;
};
constexpr KindInfo kKinds[] = {
    {"Service", "v1"},
    {"EndpointSlice", "discovery.k8s.io/v1"},
    {"Node", "v1"},
    {"ServiceCIDR", "networking.k8s.io/v1"},
    {"KubeProxyConfiguration", "kubeproxy.config.k8s.io/v1alpha1"},
    {"NodeEnvironment", "kpc.dev/v1alpha1"},
};

std::string where(const SourceManager& sm, Pos p) {
  if (!p.known()) return "<unknown>";
  return sm.name(p.file) + ":" + std::to_string(p.line) + ":" + std::to_string(p.col);
}

// kubeadm keeps kube-proxy's configuration in this ConfigMap, under this key.
constexpr const char* kKubeProxyConfigMapNs = "kube-system";
constexpr const char* kKubeProxyConfigMapName = "kube-proxy";
constexpr const char* kKubeProxyConfigKey = "config.conf";

void remap_positions(DocNode& n, uint32_t from_file, uint32_t to_file, uint32_t line_offset, uint32_t col_offset) {
  auto fix = [&](Pos& p) {
    if (p.file != from_file) return;
    p = Pos{to_file, p.line + line_offset, p.col + col_offset};
  };
  fix(n.pos);
  for (auto& k : n.keys) fix(k.pos);
  for (auto& item : n.items) remap_positions(item, from_file, to_file, line_offset, col_offset);
}

// Where a literal block scalar's text (`config.conf: |`) sits in its file: the line before its
// first line and its indentation, when every line of `text` is in the file verbatim at that
// indentation (so a position inside the text maps to one in the file); nullopt otherwise
// (folded or quoted scalars, JSON strings with escapes).
std::optional<std::pair<uint32_t, uint32_t>> block_scalar_origin(const SourceManager& sm, Pos at,
                                                                 std::string_view text) {
  if (!at.known()) return std::nullopt;
  const std::string& file = sm.text(at.file);
  std::vector<std::string_view> lines;
  for (size_t i = 0, e; i < file.size(); i = e + 1) {
    e = file.find('\n', i);
    if (e == std::string::npos) e = file.size();
    lines.emplace_back(file.data() + i, e - i);
  }
  if (at.line == 0 || at.line > lines.size()) return std::nullopt;
  std::string_view head = lines[at.line - 1];
  if (at.col == 0 || at.col > head.size() || head[at.col - 1] != '|') return std::nullopt;
  std::vector<std::string_view> body;
  for (size_t i = 0, e; i < text.size(); i = e + 1) {
    e = text.find('\n', i);
    if (e == std::string::npos) e = text.size();
    body.emplace_back(text.data() + i, e - i);
  }
  size_t indent = std::string::npos;
  for (size_t k = 0; k < body.size() && at.line + k < lines.size(); ++k)
    if (!body[k].empty()) {
      std::string_view l = lines[at.line + k];
      indent = l.find_first_not_of(' ');
      break;
    }
  if (indent == std::string::npos) return std::nullopt;
  for (size_t k = 0; k < body.size(); ++k) {
    if (at.line + k >= lines.size()) return std::nullopt;
    std::string_view l = lines[at.line + k];
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (body[k].empty() ? l.find_first_not_of(' ') != std::string_view::npos
                        : (l.size() < indent || l.substr(indent) != body[k] ||
                           l.substr(0, indent).find_first_not_of(' ') != std::string_view::npos))
      return std::nullopt;
  }
  return std::pair<uint32_t, uint32_t>{at.line, static_cast<uint32_t>(indent)};
}

class SnapshotBuilder {
 public:
  SnapshotBuilder(SourceManager& sm, const ReadLimits& limits, Snapshot* out, DiagSink& diags)
      : sm_(sm), limits_(limits), out_(out), diags_(diags) {}

  void document(const DocNode& doc) {
    ++out_->documents;
    if (!doc.is_map()) {
      diags_.report(DiagCode::NotAnObject, doc.pos, "", "", std::string("expected an object, got ") + kind_name(doc.kind));
      return;
    }
    const DocNode* kind = doc.get("kind");
    const DocNode* api = doc.get("apiVersion");
    if (!kind || kind->kind != DocNode::Kind::String || !api || api->kind != DocNode::Kind::String) {
      diags_.report(DiagCode::MissingKind, doc.pos, "", "", "document has no string `apiVersion` and `kind`");
      return;
    }
    const std::string& k = kind->text;
    if (k == "List" || (k.size() > 4 && k.ends_with("List") && doc.get("items"))) {
      const DocNode* items = doc.get("items");
      if (!items || items->is_null()) return;
      if (!items->is_seq()) {
        diags_.report(DiagCode::WrongType, items->pos, "List", "items", "expected list");
        return;
      }
      for (const auto& item : items->items) {
        if (item.is_map() && !item.get("kind") && k != "List") {
          // Typed lists (ServiceList) may omit kind/apiVersion on items.
          DocNode copy = item;
          copy.keys.push_back({"kind", item.pos});
          copy.items.push_back(DocNode{DocNode::Kind::String, item.pos, k.substr(0, k.size() - 4), {}, {}});
          copy.keys.push_back({"apiVersion", item.pos});
          copy.items.push_back(DocNode{DocNode::Kind::String, item.pos, api->text, {}, {}});
          object(copy, k.substr(0, k.size() - 4), api->text);
          continue;
        }
        document_in_list(item);
      }
      return;
    }
    object(doc, k, api->text);
  }

  void finish() {
    check_duplicates(out_->services, "Service");
    check_duplicates(out_->slices, "EndpointSlice");
    check_duplicates(out_->nodes, "Node");
    check_duplicates(out_->service_cidrs, "ServiceCIDR");
    check_service_conflicts();
    check_endpoint_use();
  }

 private:
  void document_in_list(const DocNode& item) {
    if (!item.is_map()) {
      diags_.report(DiagCode::NotAnObject, item.pos, "", "", std::string("List item: expected an object, got ") + kind_name(item.kind));
      return;
    }
    const DocNode* kind = item.get("kind");
    const DocNode* api = item.get("apiVersion");
    if (!kind || kind->kind != DocNode::Kind::String || !api || api->kind != DocNode::Kind::String) {
      diags_.report(DiagCode::MissingKind, item.pos, "", "", "List item has no string `apiVersion` and `kind`");
      return;
    }
    if (kind->text == "List") {
      diags_.report(DiagCode::NotAnObject, item.pos, "", "", "nested List objects are not supported");
      return;
    }
    object(item, kind->text, api->text);
  }

  void object(const DocNode& obj, const std::string& kind, const std::string& api) {
    if (kind == "ConfigMap" && api == "v1" && is_kube_proxy_config_map(obj)) {
      kube_proxy_config_map(obj);
      return;
    }
    const KindInfo* info = nullptr;
    for (const auto& k : kKinds)
      if (kind == k.kind) info = &k;
    if (!info) {
      ++out_->skipped_kinds[printable(kind.substr(0, 80))];
      return;
    }
    if (api != info->api_version) {
      diags_.report(DiagCode::UnsupportedVersion, obj.get("apiVersion")->pos, kind, "apiVersion",
                    "\"" + api + "\" is not supported; kpc reads " + info->api_version);
      return;
    }
    if (kind == "Service") {
      Service s;
      if (decode_service(obj, &s, diags_)) out_->services.push_back(std::move(s));
    } else if (kind == "EndpointSlice") {
      EndpointSlice s;
      if (decode_endpoint_slice(obj, &s, diags_)) out_->slices.push_back(std::move(s));
    } else if (kind == "Node") {
      Node n;
      if (decode_node(obj, &n, diags_)) out_->nodes.push_back(std::move(n));
    } else if (kind == "ServiceCIDR") {
      ServiceCIDR c;
      if (decode_service_cidr(obj, &c, diags_)) out_->service_cidrs.push_back(std::move(c));
    } else if (kind == "KubeProxyConfiguration") {
      single(obj, kind, out_->config.present, out_->config.pos);
      ProxyConfig c;
      if (decode_proxy_config(obj, &c, diags_)) out_->config = std::move(c);
    } else {
      single(obj, kind, out_->env.present, out_->env.pos);
      NodeEnvironment e;
      if (decode_node_environment(obj, &e, diags_)) out_->env = std::move(e);
    }
  }

  static bool is_kube_proxy_config_map(const DocNode& obj) {
    const DocNode* meta = obj.get("metadata");
    const DocNode* name = meta ? meta->get("name") : nullptr;
    const DocNode* ns = meta ? meta->get("namespace") : nullptr;
    return name && ns && name->kind == DocNode::Kind::String && ns->kind == DocNode::Kind::String &&
           name->text == kKubeProxyConfigMapName && ns->text == kKubeProxyConfigMapNs;
  }

  // kubeadm's ConfigMap kube-system/kube-proxy: its `config.conf` is read as if it were a
  // KubeProxyConfiguration document of the snapshot, located inside the ConfigMap's text when
  // it is a literal block scalar (else in a file named after the key's position).
  void kube_proxy_config_map(const DocNode& obj) {
    const std::string object = std::string("ConfigMap ") + kKubeProxyConfigMapNs + "/" + kKubeProxyConfigMapName;
    const std::string path = std::string("data.") + kKubeProxyConfigKey;
    const DocNode* data = obj.get("data");
    const DocNode* conf = data && data->is_map() ? data->get(kKubeProxyConfigKey) : nullptr;
    if (!conf) {
      ++out_->skipped_kinds["ConfigMap"];
      diags_.report(DiagCode::WarnIgnoredValue, obj.pos, object, "data",
                    std::string("no `") + kKubeProxyConfigKey + "` key: kubeadm's kube-proxy configuration is not here");
      return;
    }
    if (conf->kind != DocNode::Kind::String) {
      diags_.report(DiagCode::WrongType, conf->pos, object, path,
                    std::string("expected a string (a KubeProxyConfiguration document), got ") + kind_name(conf->kind));
      return;
    }
    std::string origin = where(sm_, conf->pos);
    uint32_t inner = sm_.add(origin + " (" + object + " " + path + ")", conf->text);
    std::vector<DocNode> docs;
    DiagSink inner_diags;
    bool parsed = read_yaml(sm_, inner, limits_, &docs, inner_diags);
    auto mapped = block_scalar_origin(sm_, conf->pos, conf->text);
    if (mapped) {
      // Line l, column c of the text is line origin + l, column indent + c of the file.
      for (auto& d : docs) remap_positions(d, inner, conf->pos.file, mapped->first, mapped->second);
      for (const auto& d : inner_diags.all()) {
        Diagnostic copy = d;
        if (copy.pos.file == inner)
          copy.pos = Pos{conf->pos.file, copy.pos.line + mapped->first, copy.pos.col + mapped->second};
        diags_.report(std::move(copy));
      }
    } else {
      for (const auto& d : inner_diags.all()) diags_.report(d);
    }
    if (!parsed) return;
    const DocNode* kind = docs.size() == 1 && docs[0].is_map() ? docs[0].get("kind") : nullptr;
    const DocNode* api = docs.size() == 1 && docs[0].is_map() ? docs[0].get("apiVersion") : nullptr;
    if (!kind || kind->kind != DocNode::Kind::String || kind->text != "KubeProxyConfiguration" || !api ||
        api->kind != DocNode::Kind::String) {
      diags_.report(DiagCode::InvalidConfig, conf->pos, object, path,
                    "expected one KubeProxyConfiguration document (with apiVersion and kind), as kubeadm writes it");
      return;
    }
    this->object(docs[0], kind->text, api->text);
  }

  void single(const DocNode& obj, const std::string& kind, bool present, Pos first) {
    if (!present) return;
    Diagnostic d{DiagCode::MultipleConfigs, obj.pos, kind, "", "only one " + kind + " may be given", {}};
    d.notes.push_back("the first one is at " + where(sm_, first));
    diags_.report(std::move(d));
  }

  template <typename T>
  void check_duplicates(std::vector<T>& objs, const char* kind) {
    std::stable_sort(objs.begin(), objs.end(), [](const T& a, const T& b) {
      return std::tie(a.meta.ns, a.meta.name) < std::tie(b.meta.ns, b.meta.name);
    });
    for (size_t i = 1; i < objs.size(); ++i) {
      if (objs[i].meta.ns != objs[i - 1].meta.ns || objs[i].meta.name != objs[i - 1].meta.name) continue;
      Diagnostic d{DiagCode::DuplicateObject, objs[i].meta.pos, std::string(kind) + " " + objs[i].meta.key(), "",
                   "defined more than once", {}};
      d.notes.push_back("also defined at " + where(sm_, objs[i - 1].meta.pos));
      diags_.report(std::move(d));
    }
  }

  // Objects kube-proxy reads past without a word: each is a warning naming it, so that nothing
  // in a snapshot is dropped silently (docs/snapshot.md, "What kube-proxy ignores").
  static bool ignored_by_labels(const ObjectMeta& m) {
    return m.labels.count("service.kubernetes.io/service-proxy-name") || m.labels.count("service.kubernetes.io/headless");
  }

  void check_endpoint_use() {
    std::map<std::pair<std::string_view, std::string_view>, const Service*> by_name;
    for (const auto& s : out_->services) {
      by_name[{s.meta.ns, s.meta.name}] = &s;
      if (ignored_by_labels(s.meta) || s.headless || !s.cluster_ips.empty() ||
          s.effective_type() == ServiceType::ExternalName)
        continue;
      diags_.report(DiagCode::WarnNoClusterIP, s.meta.pos, "Service " + s.meta.key(), "spec.clusterIP",
                    "the Service has no clusterIP: kube-proxy writes no rules for it");
    }
    std::map<const Service*, std::vector<const EndpointSlice*>> slices_of;
    for (const auto& sl : out_->slices) {
      std::string object = "EndpointSlice " + sl.meta.key();
      if (ignored_by_labels(sl.meta)) continue;
      if (sl.address_type == AddressType::FQDN) {
        Pos at = sl.meta.fields.at("addressType");
        diags_.report(DiagCode::WarnSliceIgnored, at.known() ? at : sl.meta.pos, object, "addressType",
                      "an FQDN slice: kube-proxy uses only IPv4 and IPv6 slices, its endpoints are not used");
        continue;
      }
      const std::string& service = sl.service_name();
      if (service.empty()) {
        diags_.report(DiagCode::WarnSliceIgnored, sl.meta.pos, object, "metadata.labels",
                      "no kubernetes.io/service-name label: kube-proxy ignores the slice, its endpoints are not used");
        continue;
      }
      auto it = by_name.find({sl.meta.ns, service});
      if (it == by_name.end()) {
        diags_.report(DiagCode::WarnSliceIgnored, sl.meta.pos, object, "metadata.labels",
                      "kubernetes.io/service-name names Service " + sl.meta.ns + "/" + service +
                          ", which the snapshot does not have: its endpoints are not used");
        continue;
      }
      const Service& svc = *it->second;
      if (ignored_by_labels(svc.meta)) continue;
      slices_of[&svc].push_back(&sl);
      for (size_t i = 0; i < sl.ports.size(); ++i) {
        const EndpointPort& p = sl.ports[i];
        std::string why;
        if (!p.name)
          why = "has no `name`: kube-proxy ignores it (the port of an unnamed Service port is `name: \"\"`)";
        else if (!p.protocol)
          why = "has no `protocol`: kube-proxy ignores it";
        else if (!p.port || *p.port == 0)
          why = "has no port number: kube-proxy ignores it";
        else if (std::none_of(svc.ports.begin(), svc.ports.end(), [&](const ServicePort& sp) {
                   return sp.name == *p.name && sp.protocol == *p.protocol;
                 }))
          why = "\"" + *p.name + "\"/" + protocol_name(*p.protocol) + " is no port of Service " + svc.meta.key() +
                ": its endpoints are not used";
        else
          continue;
        diags_.report(DiagCode::WarnSlicePortUnmatched, p.pos.known() ? p.pos : sl.meta.pos, object,
                      "ports[" + std::to_string(i) + "]", "port " + why);
      }
    }
    for (const auto& [svc, slices] : slices_of) {
      // Slices without ports (the controller's placeholder for a Service without endpoints) say nothing.
      bool any_ports = std::any_of(slices.begin(), slices.end(), [](const EndpointSlice* sl) { return !sl->ports.empty(); });
      if (!any_ports) continue;
      for (size_t j = 0; j < svc->ports.size(); ++j) {
        const ServicePort& sp = svc->ports[j];
        bool found = false;
        for (const EndpointSlice* sl : slices)
          for (const auto& p : sl->ports) found |= p.name && *p.name == sp.name && p.protocol == sp.protocol;
        if (found) continue;
        diags_.report(DiagCode::WarnServicePortUnmatched, sp.pos.known() ? sp.pos : svc->meta.pos,
                      "Service " + svc->meta.key(), "spec.ports[" + std::to_string(j) + "]",
                      "no EndpointSlice port of this Service is named \"" + sp.name + "\" with protocol " +
                          protocol_name(sp.protocol) + ": the port gets no endpoints (kube-proxy rejects its traffic)");
      }
    }
  }

  void check_service_conflicts() {
    std::map<IPAddr, const Service*> ips;
    std::map<std::pair<int32_t, Protocol>, const Service*> node_ports;
    for (const auto& s : out_->services) {
      for (size_t i = 0; i < s.cluster_ips.size(); ++i) {
        auto [it, fresh] = ips.emplace(s.cluster_ips[i], &s);
        if (fresh || it->second == &s) continue;
        // Located at the conflicting entry (decode_cluster_ips records spec.clusterIPs[0] at
        // spec.clusterIP when only the singular field is written).
        std::string path = "spec.clusterIPs[" + std::to_string(i) + "]";
        Diagnostic d{DiagCode::ClusterIPConflict, s.meta.fields.at(path), "Service " + s.meta.key(), path,
                     s.cluster_ips[i].str() + " is already allocated to Service " + it->second->meta.key(), {}};
        if (!d.pos.known()) d.pos = s.meta.pos;
        d.notes.push_back("allocated at " + where(sm_, it->second->meta.pos));
        diags_.report(std::move(d));
      }
      for (size_t i = 0; i < s.ports.size(); ++i) {
        const auto& p = s.ports[i];
        if (p.node_port == 0) continue;
        auto [it, fresh] = node_ports.emplace(std::pair{p.node_port, p.protocol}, &s);
        if (fresh || it->second == &s) continue;
        Diagnostic d{DiagCode::NodePortConflict, p.pos, "Service " + s.meta.key(),
                     "spec.ports[" + std::to_string(i) + "].nodePort",
                     std::to_string(p.node_port) + "/" + protocol_name(p.protocol) +
                         " is already allocated to Service " + it->second->meta.key(), {}};
        d.notes.push_back("allocated at " + where(sm_, it->second->meta.pos));
        diags_.report(std::move(d));
      }
    }
  }

  SourceManager& sm_;
  const ReadLimits& limits_;
  Snapshot* out_;
  DiagSink& diags_;
};

bool looks_like_json(const std::string& name, const std::string& text) {
  if (name.ends_with(".json")) return true;
  size_t i = text.find_first_not_of(" \t\r\n");
  return i != std::string::npos && (text[i] == '{' || text[i] == '[') && !name.ends_with(".yaml") &&
         !name.ends_with(".yml");
}

// Parses one registered file into documents; false on a syntax/limit error.
bool parse_file(const SourceManager& sm, uint32_t file, const LoadOptions& opts, std::vector<DocNode>* docs,
                DiagSink& diags) {
  const std::string& text = sm.text(file);
  size_t bad = 0;
  if (!is_clean_text(text, &bad)) {
    unsigned char c = static_cast<unsigned char>(text[bad]);
    std::string what = c == 0 ? "a NUL byte" : c < 0x80 ? "a control character" : "invalid UTF-8";
    diags.report(DiagCode::BinaryInput, sm.position(file, bad), "", "", "input contains " + what + "; expected YAML or JSON text");
    return false;
  }
  if (looks_like_json(sm.name(file), text)) {
    DocNode root;
    if (!read_json(sm, file, opts.limits, &root, diags)) return false;
    docs->push_back(std::move(root));
    return true;
  }
  return read_yaml(sm, file, opts.limits, docs, diags);
}

bool load_registered(const std::vector<uint32_t>& files, const LoadOptions& opts, SourceManager& sm, Snapshot* out,
                     DiagSink& diags) {
  SnapshotBuilder builder(sm, opts.limits, out, diags);
  for (uint32_t f : files) {
    std::vector<DocNode> docs;
    if (!parse_file(sm, f, opts, &docs, diags)) continue;
    for (const auto& d : docs) builder.document(d);
  }
  builder.finish();
  // Only on a valid snapshot: a Node that failed to decode would make a good name look unknown.
  if (!opts.node_name.empty() && !diags.has_errors()) select_node(out, opts.node_name, sm, diags);
  diags.sort_and_dedup();
  return !diags.has_errors();
}

}  // namespace

bool select_node(Snapshot* snap, const std::string& given, const SourceManager& sm, DiagSink& diags) {
  std::string name = to_lower(trim(given));  // as kube-proxy treats --hostname-override
  if (auto err = check_dns1123_subdomain(name)) {
    diags.report(DiagCode::InvalidName, {}, "", "", "--node \"" + printable_capped(given, 253) + "\": " + *err);
    return false;
  }
  if (snap->nodes.empty() || snap->find_node(name)) {
    snap->config.hostname_override = name;
    return true;
  }
  // Sorted by name already (finish()); a long list is cut, every name is still findable with kubectl.
  constexpr size_t kListed = 20;
  std::string names;
  for (size_t i = 0; i < snap->nodes.size() && i < kListed; ++i)
    names += (i ? ", " : "") + snap->nodes[i].meta.name;
  if (snap->nodes.size() > kListed) names += ", ... (" + std::to_string(snap->nodes.size() - kListed) + " more)";
  Diagnostic d{DiagCode::NodeUnknown, {}, "", "",
               "--node \"" + printable(name.substr(0, 253)) + "\": the snapshot has no such Node; its " +
                   std::to_string(snap->nodes.size()) + " Node" + (snap->nodes.size() == 1 ? "" : "s") + ": " + names,
               {}};
  for (size_t i = 0; i < snap->nodes.size() && i < kListed; ++i)
    d.notes.push_back("Node " + snap->nodes[i].meta.name + " is at " + where(sm, snap->nodes[i].meta.pos));
  diags.report(std::move(d));
  return false;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& paths, DiagSink& diags) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        auto ext = it->path().extension().string();
        // Hidden files and directories (.git, editor swap files, fixture metadata) are skipped.
        if (it->path().filename().string().starts_with(".")) {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json"))
          found.push_back(it->path().string());
      }
      if (ec) diags.report(DiagCode::IoError, {}, "", "", p + ": " + ec.message());
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

bool load_snapshot(const std::vector<std::string>& paths, const LoadOptions& opts, SourceManager& sm, Snapshot* out,
                   DiagSink& diags) {
  std::vector<uint32_t> files;
  for (const auto& path : expand_inputs(paths, diags)) {
    // Size-checked before reading (a regular file by its size, a pipe or stdin by
    // stopping at the limit): no input can make us buffer without bound.
    std::string text;
    InputError err;
    if (!read_input(path, opts.max_input_size, &text, &err)) {
      diags.report(err.code, {}, "", "", err.message);
      continue;
    }
    files.push_back(sm.add(path == "-" ? "<stdin>" : path, std::move(text)));
  }
  if (files.empty() && !diags.has_errors()) diags.report(DiagCode::NoInput, {}, "", "", "no input files");
  if (diags.has_errors()) {
    // Still parse what we could read, so every error is reported in one run.
    load_registered(files, opts, sm, out, diags);
    return false;
  }
  return load_registered(files, opts, sm, out, diags);
}

bool load_snapshot_text(const std::vector<std::pair<std::string, std::string>>& files, const LoadOptions& opts,
                        SourceManager& sm, Snapshot* out, DiagSink& diags) {
  std::vector<uint32_t> ids;
  for (const auto& [name, text] : files) {
    if (text.size() > opts.max_input_size) {
      diags.report(DiagCode::InputTooLarge, {}, "", "", name + ": exceeds the limit of " + std::to_string(opts.max_input_size) + " bytes");
      continue;
    }
    ids.push_back(sm.add(name, text));
  }
  bool ok = load_registered(ids, opts, sm, out, diags);
  return ok && !diags.has_errors();
}

}  // namespace kpc
