// Decoders from a located DocNode object to the typed model, one per kind.
// Each validates as the API server would for every field kube-proxy reads and
// reports every problem it finds (never just the first). Returns false if any
// error was reported for the object (the object is then not added).
#pragma once

#include "compiler/model/doc.h"
#include "compiler/model/objects.h"
#include "compiler/support/diag.h"

namespace kpc {

bool decode_service(const DocNode& obj, Service* out, DiagSink& diags);
bool decode_endpoint_slice(const DocNode& obj, EndpointSlice* out, DiagSink& diags);
bool decode_node(const DocNode& obj, Node* out, DiagSink& diags);
bool decode_service_cidr(const DocNode& obj, ServiceCIDR* out, DiagSink& diags);
bool decode_proxy_config(const DocNode& obj, ProxyConfig* out, DiagSink& diags);
bool decode_node_environment(const DocNode& obj, NodeEnvironment* out, DiagSink& diags);

class ObjectReader;
/// Shared by all kinds: metadata.name/namespace/labels/annotations with name rules.
/// name_rule: 0 = DNS-1123 subdomain, 1 = DNS-1035 label. Sets reader's object label.
void decode_meta(const DocNode& obj, const char* kind, bool namespaced, int name_rule, ObjectMeta* meta,
                 ObjectReader& r);
/// Parses a Go duration ("1h2m3.5s", "300ms"); nullopt when malformed.
std::optional<Duration> parse_go_duration(std::string_view s);

}  // namespace kpc
