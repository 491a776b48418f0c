// `kpc trace` on nftables input (trace_nft.h): loads the node's nftables state with the nft
// model (verifier/nft) and traces one packet with the nft tracer (verifier/nft_trace). Output
// and assertions as for iptables (cmd_trace.cpp); the JSON has the same shape, with nft's
// probabilities (denominators are not powers of two: numgen shares are 1/N) and nft's rule
// positions (table, hook, chain, rule, handle).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "compiler/ir/rule.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/json_report.h"
#include "tools/kpc/text_layout.h"
#include "tools/kpc/trace_expect.h"
#include "tools/kpc/trace_nft.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_trace/tracer.h"

namespace kpc::cli {
namespace {

namespace nt = verifier::nft_trace;

int bad(const std::string& msg) {
  print_error("kpc trace: " + msg);
  return kExitError;
}

// An nft error as nft prints it (file:line:column, the line, a marker), through the recorder so
// that --format json lists it too, located.
void print_nft_error(const verifier::nft::NftError& e) {
  std::string rendered = e.render();
  while (!rendered.empty() && rendered.back() == '\n') rendered.pop_back();
  print_tool_error(rendered, e.file, e.line, e.col_begin, e.message);
}

// The one probability shape of every kpc document (schemas/output/common.schema.json), with
// denominator_log2 null: numgen's 1/N shares are not dyadic.
nlohmann::ordered_json probability_json(const nt::Fraction& p) {
  nlohmann::ordered_json j;
  j["percent"] = std::round(p.to_double() * 100 * 10000) / 10000;
  j["fraction"] = p.fraction();
  j["numerator"] = p.numerator().str();
  int l2 = p.denominator_log2();
  j["denominator_log2"] = l2 >= 0 ? nlohmann::ordered_json(l2) : nlohmann::ordered_json(nullptr);
  j["denominator"] = p.denominator().str();
  j["decimal"] = p.decimal(10);
  return j;
}

nlohmann::ordered_json opt(const std::optional<std::string>& s) {
  return s ? nlohmann::ordered_json(*s) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json to_json(const nt::Packet& pkt, const nt::TraceOptions& topt, const nt::TraceResult& r) {
  nlohmann::ordered_json j = json_document("trace");
  j["backend"] = "nftables";
  nlohmann::ordered_json p;
  p["src"] = pkt.src.str();
  p["dst"] = pkt.dst.str();
  p["proto"] = verifier::trace::proto_name(pkt.proto);
  p["dport"] = pkt.dport;
  p["sport"] = pkt.sport ? nlohmann::ordered_json(*pkt.sport) : nlohmann::ordered_json(nullptr);
  p["from"] = nt::origin_name(pkt.origin);
  p["in_iface"] = opt(pkt.in_iface);
  p["out_iface"] = opt(pkt.out_iface);
  p["mark"] = hex(pkt.mark);
  p["ctstate"] = ir::ctstate_text(pkt.ctstate);
  p["remembered"] = pkt.remembered;
  if (!pkt.remembered.empty()) p["remembered_age_seconds"] = pkt.remembered_age;
  nlohmann::ordered_json locals = nlohmann::ordered_json::array();
  for (const auto& a : topt.local_addresses) locals.push_back(a.str());
  p["local_addresses"] = locals;
  j["packet"] = p;
  j["notes"] = r.notes;
  nlohmann::ordered_json outs = nlohmann::ordered_json::array();
  for (const auto& o : r.outcomes) {
    nlohmann::ordered_json x;
    x["probability"] = probability_json(o.probability);
    x["verdict"] = nt::verdict_name(o.verdict);
    x["route"] = o.route.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.route);
    x["dnat"] = o.dnat ? nlohmann::ordered_json(o.dnat_text) : nlohmann::ordered_json(nullptr);
    x["masquerade"] = o.masquerade;
    x["snat"] = o.snat_text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.snat_text);
    x["mark"] = hex(o.final_mark);
    x["options"] = o.options.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.options);
    std::string aff;
    for (const auto& a : o.affinity) aff += (aff.empty() ? "" : "; ") + a;
    x["affinity"] = aff;
    x["services"] = o.services;
    if (o.verdict == nt::Verdict::Unknown) x["unknown"] = o.unknown_reason;
    nlohmann::ordered_json path = nlohmann::ordered_json::array();
    for (const auto& s : o.path) {
      nlohmann::ordered_json st;
      static const char* kinds[] = {"rule", "policy", "unknown"};
      st["kind"] = kinds[s.kind];
      st["table"] = s.table;
      st["hook"] = s.hook;
      st["chain"] = s.chain;
      st["rule"] = s.rule_no;
      st["handle"] = s.handle;
      st["text"] = s.text;
      if (!s.comment.empty()) st["comment"] = s.comment;
      if (!s.note.empty()) st["note"] = s.note;
      path.push_back(st);
    }
    x["path"] = path;
    outs.push_back(x);
  }
  j["outcomes"] = outs;
  nlohmann::ordered_json dist = nlohmann::ordered_json::array();
  for (const auto& d : nt::distribution(r)) {
    nlohmann::ordered_json x;
    x["probability"] = probability_json(d.probability);
    x["verdict"] = nt::verdict_name(d.verdict);
    x["dnat"] = d.dnat_text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(d.dnat_text);
    x["masquerade"] = d.masquerade;
    if (!d.unknown_reason.empty()) x["unknown"] = d.unknown_reason;
    x["outcomes"] = d.outcomes;
    dist.push_back(x);
  }
  j["distribution"] = dist;
  j["total_probability"] = probability_json(r.total());
  return j;
}

// The node's state from RULES; node_addresses: a snapshot's Node. False with the error printed.
bool load_state(const NftTraceRequest& r, IPFamily family, verifier::nft::NftState* state,
                std::vector<IPAddr>* node_addresses, std::vector<std::string>* notes) {
  std::error_code ec;
  bool directory = r.rules != "-" && std::filesystem::is_directory(r.rules, ec);
  InputText input;
  std::string_view text;
  if (r.text) {
    text = *r.text;
  } else if (!directory) {
    InputError err;
    if (!input.load(r.rules, r.max_input_size, &err)) {
      print_input_error(err);
      return false;
    }
    text = input.view();
  }
  std::string name = r.rules == "-" ? "<stdin>" : r.rules;
  if (!directory && looks_like_nft(text)) {
    verifier::nft::NftError err;
    if (verifier::nft::looks_like_listing(text)) {
      if (!verifier::nft::parse_listing(text, name, state, &err)) {
        print_nft_error(err);
        return false;
      }
      return true;
    }
    auto res = verifier::nft::apply_script(*state, text, name);
    if (!res.ok) {
      for (const auto& e : res.errors) print_nft_error(e);
      if (res.errors.empty() && res.error) print_nft_error(*res.error);
      return false;
    }
    return true;
  }
  // A snapshot: compiled with the nftables back end (a full sync on a fresh node).
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  LoadOptions lo;
  lo.max_input_size = r.max_input_size;
  lo.node_name = r.node;
  bool ok = directory ? load_snapshot({r.rules}, lo, sm, &snap, diags)
                      : load_snapshot_text({{name, std::string(text)}}, lo, sm, &snap, diags);
  std::optional<std::string> program;
  if (ok) program = compile_program(snap, Target{BackendKind::NFTables, family}, r.kube_proxy_version, diags);
  if (program) append_node_addresses(snap, family, node_addresses);
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (!program) return false;
  auto res = verifier::nft::apply_script(*state, *program, "compiled.nft");
  if (!res.ok) {
    print_error("internal error: the compiled transaction fails: " +
                (res.error ? res.error->to_string() : std::string("?")));
    return false;
  }
  notes->push_back("compiled the snapshot with the nftables back end (kube-proxy " + r.kube_proxy_version + ")");
  return true;
}

}  // namespace

bool looks_like_nft(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t e = text.find('\n', i);
    std::string_view line(text.data() + i, (e == std::string::npos ? text.size() : e) - i);
    i = e == std::string::npos ? text.size() : e + 1;
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string_view::npos || line[b] == '#') continue;
    line = line.substr(b);
    for (const char* w : {"add ", "create ", "insert ", "replace ", "delete ", "flush ", "destroy ", "table "})
      if (line.starts_with(w)) return true;
    return false;
  }
  return false;
}

int run_trace_nft(const NftTraceRequest& o) {
  nt::Packet pkt;
  auto src = IPAddr::parse(o.src), dst = IPAddr::parse(o.dst);
  if (!src) return bad("--src: not an IP address: " + o.src);
  if (!dst) return bad("--dst: not an IP address: " + o.dst);
  if (src->family != dst->family) return bad("--src and --dst must be of one family");
  const IPFamily family = src->family;
  pkt.src = *src;
  pkt.dst = *dst;
  auto proto = verifier::trace::proto_from_name(o.proto);
  if (!proto) return bad("--proto: expected tcp, udp or sctp");
  pkt.proto = *proto;
  if (o.dport < 0 || o.dport > 65535) return bad("--dport: expected 0..65535");
  pkt.dport = static_cast<uint16_t>(o.dport);
  if (o.sport > 65535) return bad("--sport: expected 0..65535");
  if (o.sport >= 0) pkt.sport = static_cast<uint16_t>(o.sport);
  pkt.origin = *verifier::trace::origin_from_name(o.from);
  if (!o.in_iface.empty())
    pkt.in_iface = o.in_iface;
  else if (pkt.origin == nt::Origin::External)
    pkt.in_iface = "eth0";
  if (!o.out_iface.empty()) pkt.out_iface = o.out_iface;
  if (!parse_u32(o.mark, &pkt.mark)) return bad("--mark: expected a 32-bit number");
  auto ct = ir::parse_ctstate(o.ctstate);
  if (!ct || !*ct) return bad("--ctstate: expected NEW, ESTABLISHED, RELATED, INVALID or UNTRACKED");
  pkt.ctstate = *ct;

  std::vector<std::string> notes;
  nt::TraceOptions topt;
  topt.max_outcomes = o.max_outcomes;
  topt.kernel_numgen = o.kernel_numgen;
  if (o.kernel_numgen) notes.push_back("numgen shares: the kernel's reciprocal_scale split (--numgen kernel)");
  for (const auto& s : o.local_addresses) {
    auto a = IPAddr::parse(s);
    if (!a) return bad("--local-address: not an IP address: " + s);
    topt.local_addresses.push_back(*a);
  }

  verifier::nft::NftState state;
  std::vector<IPAddr> node_addresses;
  if (!load_state(o, family, &state, &node_addresses, &notes)) return kExitError;
  if (topt.local_addresses.empty()) {
    if (!node_addresses.empty()) {
      std::sort(node_addresses.begin(), node_addresses.end());
      node_addresses.erase(std::unique(node_addresses.begin(), node_addresses.end()), node_addresses.end());
      topt.local_addresses = node_addresses;
      for (const auto& a : node_addresses) notes.push_back("local address " + a.str() + ": the snapshot's Node");
    } else {
      std::vector<std::string> why;
      topt.local_addresses = nt::infer_local_addresses(state, family, &why);
      for (const auto& w : why) notes.push_back("local address " + w);
    }
    if (topt.local_addresses.empty())
      notes.push_back("no node address known (only loopback is local): fib ... type local is false for every other "
                      "address; give --local-address");
  }
  for (const auto& a : o.affinity) {
    if (a == "new") continue;
    auto names = nt::resolve_affinity(state, a);
    if (names.empty()) return bad("--affinity: no affinity set named " + a + " or updated before a DNAT to it");
    pkt.remembered.insert(pkt.remembered.end(), names.begin(), names.end());
  }
  pkt.remembered_age = o.affinity_age;

  nt::Tracer tracer(state, topt);
  nt::TraceResult res = tracer.trace(pkt);
  res.notes.insert(res.notes.begin(), notes.begin(), notes.end());
  if (o.format == "json")
    print_json(to_json(pkt, topt, res));
  else if (!write_output("", o.verbose ? nt::format_text(pkt, topt, res) : reviewer_text(nt::format_text(pkt, topt, res))))
    return kExitError;

  std::vector<OutcomeFacts> facts;
  for (const auto& oc : res.outcomes)
    facts.push_back({nt::verdict_name(oc.verdict), oc.verdict == nt::Verdict::Unknown, oc.unknown_reason,
                     oc.dnat ? std::optional<std::string>(oc.dnat_text) : std::nullopt, oc.masquerade,
                     oc.probability.fraction()});
  return check_expectations({o.expect_dnat, o.expect_verdict, o.expect_masquerade}, facts);
}

}  // namespace kpc::cli
