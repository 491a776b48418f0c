// `kpc trace` on an IPVS program set (trace_ipvs.h): reads the four files (or compiles a snapshot
// with the IPVS back end), traces one packet with verifier/ipvs_trace and prints the outcomes as
// the iptables and nftables traces do (the same JSON document, "backend": "ipvs", with each
// outcome's virtual server and IPVS steps in its path).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "compiler/driver/compile_ipvs.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/json_report.h"
#include "tools/kpc/text_layout.h"
#include "tools/kpc/trace_expect.h"
#include "tools/kpc/trace_ipvs.h"
#include "verifier/ipvs_trace/tracer.h"

namespace kpc::cli {
namespace {

namespace it = verifier::ipvs_trace;
namespace vt = verifier::trace;

int bad(const std::string& msg) {
  print_error("kpc trace: " + msg);
  return kExitError;
}

void print_load_error(const it::LoadError& e) {
  std::string rendered = e.file + (e.line ? ":" + std::to_string(e.line) : std::string()) + ": error: " + e.message;
  print_tool_error(rendered, e.file, int(e.line), 0, e.message);
}

nlohmann::ordered_json probability_json(const it::Fraction& p) {
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
nlohmann::ordered_json opt_str(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
}

nlohmann::ordered_json to_json(const vt::Packet& pkt, const it::Client& client, const std::vector<IPAddr>& locals,
                               const it::TraceResult& r) {
  nlohmann::ordered_json j = json_document("trace");
  j["backend"] = "ipvs";
  nlohmann::ordered_json p;
  p["src"] = pkt.src.str();
  p["dst"] = pkt.dst.str();
  p["proto"] = vt::proto_name(pkt.proto);
  p["dport"] = pkt.dport;
  p["sport"] = pkt.sport ? nlohmann::ordered_json(*pkt.sport) : nlohmann::ordered_json(nullptr);
  p["from"] = vt::origin_name(pkt.origin);
  p["in_iface"] = opt(pkt.in_iface);
  p["out_iface"] = opt(pkt.out_iface);
  p["in_bridge_port"] = opt(pkt.in_bridge_port);
  p["out_bridge_port"] = opt(pkt.out_bridge_port);
  p["mark"] = hex(pkt.mark);
  p["ctstate"] = ir::ctstate_text(pkt.ctstate);
  nlohmann::ordered_json rem = nlohmann::ordered_json::array();
  if (client.remembered) rem.push_back(vt::host_port(client.remembered->address, client.remembered->port));
  p["remembered"] = rem;
  if (client.remembered) p["remembered_age_seconds"] = client.age;
  nlohmann::ordered_json la = nlohmann::ordered_json::array();
  for (const auto& a : locals) la.push_back(a.str());
  p["local_addresses"] = la;
  j["packet"] = p;
  j["notes"] = r.notes;
  nlohmann::ordered_json outs = nlohmann::ordered_json::array();
  for (const auto& o : r.outcomes) {
    nlohmann::ordered_json x;
    x["probability"] = probability_json(o.probability);
    x["verdict"] = vt::verdict_name(o.verdict);
    x["route"] = opt_str(o.route);
    x["dnat"] = o.dnat ? nlohmann::ordered_json(o.dnat_text) : nlohmann::ordered_json(nullptr);
    x["masquerade"] = o.masquerade;
    x["snat"] = opt_str(o.snat_text);
    x["mark"] = hex(o.final_mark);
    x["options"] = opt_str(o.options);
    x["affinity"] = o.affinity;
    x["services"] = nlohmann::ordered_json::array();
    x["virtual_server"] = opt_str(o.virtual_server);
    if (o.verdict == vt::Verdict::Unknown) x["unknown"] = o.unknown_reason;
    nlohmann::ordered_json path = nlohmann::ordered_json::array();
    for (const auto& s : o.path) {
      nlohmann::ordered_json st;
      static const char* kinds[] = {"rule", "not-taken", "policy", "unknown", "ipvs"};
      st["kind"] = kinds[s.kind];
      st["table"] = s.table;
      st["chain"] = s.chain;
      st["rule"] = s.rule_no;
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
  for (const auto& d : it::distribution(r)) {
    nlohmann::ordered_json x;
    x["probability"] = probability_json(d.probability);
    x["verdict"] = vt::verdict_name(d.verdict);
    x["dnat"] = opt_str(d.dnat_text);
    x["masquerade"] = d.masquerade;
    if (!d.unknown_reason.empty()) x["unknown"] = d.unknown_reason;
    x["outcomes"] = d.outcomes;
    dist.push_back(x);
  }
  j["distribution"] = dist;
  j["total_probability"] = probability_json(r.total());
  return j;
}

bool read_file(const std::string& path, uint64_t limit, std::string* out) {
  InputText t;
  InputError err;
  if (!t.load(path, limit, &err)) {
    print_input_error(err);
    return false;
  }
  *out = std::string(t.view());
  return true;
}

}  // namespace

bool load_ipvs_program_set(const IpvsLoadRequest& r, IPFamily family, verifier::ipvs_trace::ProgramSet* set,
                           std::vector<IPAddr>* node_addresses, std::vector<std::string>* notes) {
  namespace fs = std::filesystem;
  it::ProgramTexts texts;
  if (looks_like_ipvs_program_set(r.path)) {
    std::error_code ec;
    fs::path dir = fs::is_directory(r.path, ec) ? fs::path(r.path) : fs::path(r.path).parent_path();
    auto file = [&](const char* name) { return (dir / name).string(); };
    texts.ipvs_name = file("ipvs.rules");
    texts.ipset_name = file("ipset.rules");
    texts.iptables_name = file("iptables.rules");
    texts.node_plan_name = file("node.plan");
    if (!read_file(texts.ipvs_name, r.max_input_size, &texts.ipvs) ||
        !read_file(texts.ipset_name, r.max_input_size, &texts.ipset) ||
        !read_file(texts.iptables_name, r.max_input_size, &texts.iptables))
      return false;
    if (fs::exists(texts.node_plan_name, ec)) {
      std::string plan;
      if (!read_file(texts.node_plan_name, r.max_input_size, &plan)) return false;
      texts.node_plan = std::move(plan);
    } else {
      notes->push_back("no node.plan: nothing is taken as bound to kube-ipvs0, IPVS sysctls at the kernel's defaults");
    }
  } else {
    SourceManager sm;
    DiagSink diags;
    Snapshot snap;
    LoadOptions lo;
    lo.max_input_size = r.max_input_size;
    lo.node_name = r.node;
    std::error_code ec;
    bool ok = false;
    if (fs::is_directory(r.path, ec)) {
      ok = load_snapshot({r.path}, lo, sm, &snap, diags);
    } else {
      std::string text;
      if (!read_file(r.path, r.max_input_size, &text)) return false;
      ok = load_snapshot_text({{r.path == "-" ? "<stdin>" : r.path, text}}, lo, sm, &snap, diags);
    }
    std::optional<IpvsCompileResult> compiled;
    if (ok) compiled = compile_ipvs(snap, family, diags);
    if (compiled) append_node_addresses(snap, family, node_addresses);
    diags.sort_and_dedup();
    print_diagnostics(diags, sm);
    if (!compiled) return false;
    texts.ipvs = compiled->ipvs_rules;
    texts.ipset = compiled->ipset_rules;
    texts.iptables = compiled->iptables_rules;
    texts.node_plan = compiled->node_plan;
    notes->push_back("compiled the snapshot with the IPVS back end (ipvs.rules, ipset.rules, iptables.rules, node.plan)");
  }
  it::LoadError err;
  if (!it::load_program_set(texts, family, set, &err)) {
    print_load_error(err);
    return false;
  }
  return true;
}

bool looks_like_ipvs_program_set(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path == "-") return false;
  if (fs::is_directory(path, ec)) return fs::exists(fs::path(path) / "ipvs.rules", ec);
  return fs::path(path).filename() == "ipvs.rules";
}

int run_trace_ipvs(const IpvsTraceRequest& o) {
  vt::Packet pkt;
  auto src = IPAddr::parse(o.src), dst = IPAddr::parse(o.dst);
  if (!src) return bad("--src: not an IP address: " + o.src);
  if (!dst) return bad("--dst: not an IP address: " + o.dst);
  if (src->family != dst->family) return bad("--src and --dst must be of one family");
  const IPFamily family = src->family;
  pkt.src = *src;
  pkt.dst = *dst;
  auto proto = vt::proto_from_name(o.proto);
  if (!proto) return bad("--proto: expected tcp, udp or sctp");
  pkt.proto = *proto;
  if (o.dport < 0 || o.dport > 65535) return bad("--dport: expected 0..65535");
  pkt.dport = static_cast<uint16_t>(o.dport);
  if (o.sport > 65535) return bad("--sport: expected 0..65535");
  if (o.sport >= 0) pkt.sport = static_cast<uint16_t>(o.sport);
  pkt.origin = *vt::origin_from_name(o.from);
  if (!o.in_iface.empty())
    pkt.in_iface = o.in_iface;
  else if (pkt.origin == vt::Origin::External)
    pkt.in_iface = "eth0";
  if (!o.out_iface.empty()) pkt.out_iface = o.out_iface;
  if (!o.in_bridge_port.empty() && o.no_bridge_port) return bad("--in-bridge-port and --no-bridge-port exclude each other");
  if (!o.out_bridge_port.empty() && o.routed) return bad("--out-bridge-port and --routed exclude each other");
  if (!o.in_bridge_port.empty()) pkt.in_bridge_port = o.in_bridge_port;
  if (o.no_bridge_port) pkt.in_bridge_port = std::string(), pkt.out_bridge_port = std::string();
  if (!o.out_bridge_port.empty()) pkt.out_bridge_port = o.out_bridge_port;
  if (o.routed) pkt.out_bridge_port = std::string();
  if (!parse_u32(o.mark, &pkt.mark)) return bad("--mark: expected a 32-bit number");
  auto ct = ir::parse_ctstate(o.ctstate);
  if (!ct || !*ct) return bad("--ctstate: expected NEW, ESTABLISHED, RELATED, INVALID or UNTRACKED");
  pkt.ctstate = *ct;
  it::Client client;
  for (const auto& a : o.affinity) {
    if (a == "new") continue;
    auto h = verifier::ipvs::parse_host_port(a);
    if (!h || h->address.family != family)
      return bad("--affinity: for an IPVS program set, 'new' or the real server IP:PORT ([IPv6]:PORT) the client's "
                 "persistence template names: " + a);
    if (client.remembered) return bad("--affinity: one real server (a client has one template per virtual server)");
    client.remembered = *h;
  }
  client.age = o.affinity_age;

  it::TraceOptions topt;
  topt.max_outcomes = o.max_outcomes;
  topt.equal_shares_for_others = o.shares == "weighted";
  std::vector<std::string> notes;
  for (const auto& s : o.local_addresses) {
    auto a = IPAddr::parse(s);
    if (!a) return bad("--local-address: not an IP address: " + s);
    topt.local_addresses.push_back(*a);
  }
  it::ProgramSet set;
  std::vector<IPAddr> node_addresses;
  if (!load_ipvs_program_set({o.rules, o.max_input_size, o.node}, family, &set, &node_addresses, &notes))
    return kExitError;
  if (set.family != family)
    return bad(std::string("--src/--dst must be ") + family_name(set.family) + " addresses for this program set");
  if (topt.local_addresses.empty()) {
    if (!node_addresses.empty()) {
      std::sort(node_addresses.begin(), node_addresses.end());
      node_addresses.erase(std::unique(node_addresses.begin(), node_addresses.end()), node_addresses.end());
      for (const auto& a : node_addresses) notes.push_back("local address " + a.str() + ": the snapshot's Node");
      topt.local_addresses = node_addresses;
    }
    for (const auto& a : it::inferred_node_addresses(set))
      if (std::find(topt.local_addresses.begin(), topt.local_addresses.end(), a) == topt.local_addresses.end()) {
        topt.local_addresses.push_back(a);
        notes.push_back("local address " + a.str() +
                        ": a virtual server's address not bound to kube-ipvs0 (kube-proxy makes those only for the "
                        "node's own addresses)");
      }
  }
  if (topt.equal_shares_for_others)
    notes.push_back("--ipvs-shares weighted: schedulers other than rr, wrr and fo get ASSUMED weight-proportional shares");
  it::Tracer tracer(set, topt);
  it::TraceResult res = tracer.trace(pkt, client);
  res.notes.insert(res.notes.begin(), notes.begin(), notes.end());
  auto locals = tracer.local_addresses();
  if (o.format == "json")
    print_json(to_json(pkt, client, locals, res));
  else if (!write_output("", o.verbose ? it::format_text(pkt, client, locals, res)
                                       : reviewer_text(it::format_text(pkt, client, locals, res))))
    return kExitError;
  std::vector<OutcomeFacts> facts;
  for (const auto& oc : res.outcomes)
    facts.push_back({vt::verdict_name(oc.verdict), oc.verdict == vt::Verdict::Unknown, oc.unknown_reason,
                     oc.dnat ? std::optional<std::string>(oc.dnat_text) : std::nullopt, oc.masquerade,
                     oc.probability.fraction()});
  return check_expectations({o.expect_dnat, o.expect_verdict, o.expect_masquerade}, facts);
}

}  // namespace kpc::cli
