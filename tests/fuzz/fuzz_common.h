// Shared checks of the libFuzzer targets (tests/fuzz/*_fuzz.cpp, issue 6: "no input
// may crash kpc, hang it, or make it emit a rule nobody asked for").
//
// A failed check prints what it saw and aborts: libFuzzer then saves the input as
// crash-<sha1> and stops, like for a sanitizer report. Header only: each target is
// one translation unit.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/driver/compile.h"
#include "compiler/ir/printer.h"
#include "compiler/model/loader.h"
#include "compiler/model/names.h"

namespace kpc::fuzz {

[[noreturn]] inline void fail(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "\n==kpc-fuzz== CHECK FAILED: %.*s\n", static_cast<int>(what.size()), what.data());
  if (!detail.empty()) {
    // Cap the detail: a whole compiled program would drown the report.
    size_t n = detail.size() < 4000 ? detail.size() : 4000;
    std::fprintf(stderr, "%.*s%s\n", static_cast<int>(n), detail.data(), n < detail.size() ? "\n[...]" : "");
  }
  std::abort();
}

#define KPC_FUZZ_CHECK(cond, detail)                                   \
  do {                                                                 \
    if (!(cond)) ::kpc::fuzz::fail(#cond " (" __FILE__ ")", (detail)); \
  } while (0)

/// Loads one in-memory file (the name decides YAML or JSON) into snap.
struct Loaded {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  bool ok = false;
};
inline void load_one(Loaded& l, std::string name, std::string_view text) {
  std::vector<std::pair<std::string, std::string>> files;
  files.emplace_back(std::move(name), std::string(text));
  l.ok = load_snapshot_text(files, LoadOptions{}, l.sm, &l.snap, l.diags);
  // The loader's contract: false iff an error was reported.
  if (l.ok == l.diags.has_errors()) fail("load result disagrees with the diagnostics", l.diags.render(l.sm));
  // Every error is located (FILE:LINE:COL) and renders to exactly one line (+ notes) without control bytes.
  for (const auto& d : l.diags.all()) {
    if (is_warning(d.code)) continue;
    if (!d.pos.known() || d.pos.file == 0 || d.pos.file > l.sm.size() || d.pos.line == 0 || d.pos.col == 0)
      fail("unlocated error", render(d, l.sm));
  }
  std::string out = l.diags.render(l.sm);
  size_t want = 0;
  for (const auto& d : l.diags.all()) want += 1 + d.notes.size();
  size_t lines = 0;
  for (unsigned char c : out) {
    if (c == '\n') ++lines;
    else if (c < 0x20 || c == 0x7f) fail("raw control byte in rendered diagnostics", out);
  }
  if (lines != want) fail("rendered diagnostics do not have one line per diagnostic", out);
}

inline std::string show(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') out += static_cast<char>(c);
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out + "\"";
}

/// What a successful load guarantees about the model (docs/snapshot.md): every name that
/// can reach a rule comment or a chain hash passes the API server's own check.
inline void check_model(const Snapshot& s) {
  auto ok = [](const std::optional<std::string>& err, std::string_view what, std::string_view v) {
    if (err) fail(std::string(what) + " accepted but invalid: " + *err, show(v));
  };
  auto meta = [&](const ObjectMeta& m, bool service) {
    if (service) ok(check_dns1035_label(m.name), "Service name", m.name);
    else ok(check_dns1123_subdomain(m.name), "object name", m.name);
    for (const auto& [k, v] : m.labels) {
      ok(check_label_key(k), "label key", k);
      ok(check_label_value(v), "label value", v);
    }
  };
  for (size_t i = 0; i < s.services.size(); ++i) {
    const Service& svc = s.services[i];
    meta(svc.meta, true);
    ok(check_dns1123_label(svc.meta.ns), "Service namespace", svc.meta.ns);
    if (i > 0 && !(s.services[i - 1].meta.key() < svc.meta.key()))
      fail("Services not sorted or duplicated", s.services[i - 1].meta.key() + " / " + svc.meta.key());
    for (const auto& p : svc.ports) {
      if (!p.name.empty()) ok(check_dns1123_label(p.name), "Service port name", p.name);
      if (!p.target_port_name.empty()) ok(check_iana_svc_name(p.target_port_name), "targetPort name", p.target_port_name);
      if (p.port < 1 || p.port > 65535) fail("port out of range", std::to_string(p.port));
      if (p.node_port < 0 || p.node_port > 65535) fail("nodePort out of range", std::to_string(p.node_port));
      if (p.target_port < 0 || p.target_port > 65535) fail("targetPort out of range", std::to_string(p.target_port));
    }
    if (svc.health_check_node_port < 0 || svc.health_check_node_port > 65535)
      fail("healthCheckNodePort out of range", std::to_string(svc.health_check_node_port));
    if (svc.session_affinity == SessionAffinity::ClientIP &&
        (svc.affinity_timeout_seconds < 1 || svc.affinity_timeout_seconds > 86400))
      fail("affinity timeout out of range", std::to_string(svc.affinity_timeout_seconds));
    if (svc.cluster_ips.size() > 2) fail("more than two clusterIPs", svc.meta.key());
    if (svc.cluster_ips.size() == 2 && svc.cluster_ips[0].family == svc.cluster_ips[1].family)
      fail("two clusterIPs of one family", svc.meta.key());
  }
  for (size_t i = 0; i < s.slices.size(); ++i) {
    const EndpointSlice& sl = s.slices[i];
    meta(sl.meta, false);
    ok(check_dns1123_label(sl.meta.ns), "EndpointSlice namespace", sl.meta.ns);
    if (i > 0 && !(s.slices[i - 1].meta.key() < sl.meta.key()))
      fail("EndpointSlices not sorted or duplicated", s.slices[i - 1].meta.key() + " / " + sl.meta.key());
    for (const auto& p : sl.ports)
      if (p.name && !p.name->empty()) ok(check_dns1123_label(*p.name), "EndpointSlice port name", *p.name);
    for (const auto& ep : sl.endpoints) {
      if (ep.node_name) ok(check_dns1123_subdomain(*ep.node_name), "endpoint nodeName", *ep.node_name);
      if (ep.zone) ok(check_label_value(*ep.zone), "endpoint zone", *ep.zone);
      for (const auto& a : ep.addresses) {
        IPFamily want = sl.address_type == AddressType::IPv6 ? IPFamily::V6 : IPFamily::V4;
        if (sl.address_type == AddressType::FQDN || a.family != want)
          fail("endpoint address of the wrong family", sl.meta.key() + " " + a.str());
      }
    }
  }
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    meta(s.nodes[i].meta, false);
    if (i > 0 && !(s.nodes[i - 1].meta.name < s.nodes[i].meta.name))
      fail("Nodes not sorted or duplicated", s.nodes[i - 1].meta.name + " / " + s.nodes[i].meta.name);
  }
  if (!s.config.hostname_override.empty())
    ok(check_dns1123_subdomain(s.config.hostname_override), "hostnameOverride", s.config.hostname_override);
  if (!s.env.hostname.empty()) ok(check_dns1123_subdomain(s.env.hostname), "NodeEnvironment hostname", s.env.hostname);
  if (s.config.iptables.masquerade_bit < 0 || s.config.iptables.masquerade_bit > 31)
    fail("masqueradeBit out of range", std::to_string(s.config.iptables.masquerade_bit));
}

/// Value of the --comment option starting at text[at] (just after "--comment "), as
/// iptables-restore would read it: a double-quoted word, or a bare word.
inline std::string_view comment_value(std::string_view line, size_t at, bool* closed) {
  *closed = true;
  if (at < line.size() && line[at] == '"') {
    size_t end = line.find('"', at + 1);
    if (end == std::string_view::npos) {
      *closed = false;
      return line.substr(at + 1);
    }
    return line.substr(at + 1, end - at - 1);
  }
  size_t end = line.find(' ', at);
  return line.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
}

/// Every line a compiler output may have: "*table", ":CHAIN POLICY [0:0]", "-A ...",
/// "-X CHAIN", "COMMIT"; printable ASCII only; every comment safe and closed.
inline void check_program_text(std::string_view text, std::string_view what) {
  if (text.empty()) return;
  if (text.back() != '\n') fail(std::string(what) + ": output does not end with a newline", text.substr(text.size() > 200 ? text.size() - 200 : 0));
  size_t start = 0, lineno = 0;
  bool in_table = false;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++lineno;
    std::string where = std::string(what) + " line " + std::to_string(lineno);
    for (unsigned char c : line)
      if (c < 0x20 || c >= 0x7f) fail(where + ": byte outside printable ASCII", show(line));
    if (line.starts_with("*")) {
      if (in_table) fail(where + ": table opened inside a table", show(line));
      std::string_view t = line.substr(1);
      if (t != "filter" && t != "nat" && t != "mangle" && t != "raw" && t != "security")
        fail(where + ": unknown table", show(line));
      in_table = true;
      continue;
    }
    if (line == "COMMIT") {
      if (!in_table) fail(where + ": COMMIT outside a table", show(line));
      in_table = false;
      continue;
    }
    if (!in_table) fail(where + ": line outside a table", show(line));
    if (line.starts_with(":")) {
      // ":NAME POLICY [0:0]": three words, no quotes.
      size_t sp1 = line.find(' '), sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
      if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || line.substr(sp2 + 1) != "[0:0]" ||
          line.find('"') != std::string_view::npos || sp1 == 1)
        fail(where + ": malformed chain declaration", show(line));
      continue;
    }
    if (line.starts_with("-X ")) {
      if (line.find(' ', 3) != std::string_view::npos || line.size() == 3)
        fail(where + ": malformed chain deletion", show(line));
      continue;
    }
    if (!line.starts_with("-A ")) fail(where + ": not one of *table :CHAIN -A -X COMMIT", show(line));
    // Quotes only around comments; every comment safe.
    size_t quotes = 0;
    for (char c : line) quotes += c == '"';
    size_t comment_quotes = 0;
    for (size_t at = line.find("--comment "); at != std::string_view::npos;
         at = line.find("--comment ", at + 1)) {
      bool closed = true;
      std::string_view v = comment_value(line, at + 10, &closed);
      if (!closed) fail(where + ": unterminated quoted comment", show(line));
      if (!ir::is_safe_comment(v)) fail(where + ": unsafe comment " + show(v), show(line));
      if (line[at + 10] == '"') comment_quotes += 2;
    }
    if (quotes != comment_quotes) fail(where + ": a quote outside a comment", show(line));
    // (A rule may have no target: kube-proxy's "other traffic to ... will be dropped" rule
    // in KUBE-FW-* only counts.)
  }
  if (in_table) fail(std::string(what) + ": last table not committed", "");
}

/// Compiles a loaded snapshot for both back ends and checks every output line.
inline void compile_and_check(const Snapshot& snap) {
  for (Backend b : {Backend::IPTables, Backend::IP6Tables}) {
    DiagSink diags;
    // compile_iptables throws std::logic_error if unsafe comment text reaches the printer;
    // uncaught, that aborts: a finding.
    auto r = compile_iptables(snap, b, iptables::SyncOptions{}, diags);
    if (!r) {
      if (!diags.has_errors()) fail("compile failed without an error diagnostic");
      continue;
    }
    check_program_text(r->text, b == Backend::IPTables ? "iptables" : "ip6tables");
  }
}

}  // namespace kpc::fuzz
