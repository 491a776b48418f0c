// `kpc trace RULES --src IP --dst IP [--proto tcp|udp|sctp] --dport N [--sport N]
//   [--from pod|node|external] [--local-address IP...] [--in-iface IF] [--out-iface IF]
//   [--in-bridge-port P | --no-bridge-port] [--out-bridge-port P | --routed]
//   [--mark V] [--ctstate S] [--affinity new|KUBE-SEP-...|IP:PORT] [--jumps auto|yes|no]
//   [--backend iptables|ip6tables|nftables] [--flavor legacy|nft] [--format text|json] [--kube-proxy-test]`
//
// Loads RULES (an iptables-save dump or a restore program, applied with --noflush to an
// empty state) and traces one packet through it (verifier/trace/tracer.h): every
// outcome with its exact probability, verdict, DNAT destination, masquerading, final
// mark and rule path. Exit 0 traced, 2 bad input. nftables input (a knftables transaction,
// an `nft list` dump; detected from the content, or --backend nftables, which also compiles
// a snapshot with the nftables back end) goes to cmd_trace_nft.cpp.
#include <algorithm>
#include <set>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/driver/input_kind.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/trace_expect.h"
#include "tools/kpc/trace_ipvs.h"
#include "tools/kpc/trace_nft.h"
#include "tools/kpc/text_layout.h"
#include "verifier/state/state.h"
#include "verifier/sem/report.h"
#include "verifier/trace/tracer.h"

namespace kpc::cli {
namespace {

struct TraceCliOptions {
  std::string rules;
  std::string src, dst, proto = "tcp", from = "external";
  int dport = -1, sport = -1;
  std::vector<std::string> local_addresses;
  std::string in_iface, out_iface, mark = "0", ctstate = "NEW";
  std::string in_bridge_port, out_bridge_port;  ///< -m physdev (trace/physdev.h)
  bool no_bridge_port = false, routed = false;
  std::string ctmark;  ///< the connection's mark (CONNMARK, -m connmark) when not NEW
  std::vector<std::string> affinity;
  uint32_t affinity_age = 0;
  std::string jumps = "auto";
  bool backend_given = false;
  std::string ipsets;
  std::string backend = "iptables", flavor = "legacy", format = "text";
  bool kube_proxy_test = false;
  size_t max_outcomes = 100000;
  // Assertions for packet-flow tests in CI: exit 1 when one is not met.
  std::vector<std::string> expect_dnat;  ///< the exact set of DNAT destinations
  std::string expect_verdict;            ///< every outcome's verdict
  std::string expect_masquerade;         ///< yes / no, for every outcome
  uint64_t max_input_size = kDefaultMaxInputSize;
  std::string node;  ///< --node: when RULES is a snapshot
  std::string kube_proxy_version = "1.35";  ///< nftables: the layout a snapshot is compiled with
  bool flavor_given = false, jumps_given = false, version_given = false;
  std::string numgen = "uniform";  ///< nftables: numgen shares (uniform 1/N, or the kernel's split)
  bool numgen_given = false;
  bool verbose = false;  ///< text at full width (else lines of at most 100 columns)
  std::string ipvs_shares = "exact";  ///< ipvs: schedulers other than rr/wrr/fo (exact: Unknown; weighted)
  bool ipvs_shares_given = false;
};

int bad(const std::string& msg) {
  print_error("kpc trace: " + msg);
  return kExitError;
}

using verifier::sem::probability_json;  // the one shape of a probability in every document

std::string to_json(const verifier::trace::Packet& pkt, const verifier::trace::TraceOptions& topt,
                    const verifier::trace::TraceResult& r) {
  using namespace verifier::trace;
  nlohmann::ordered_json j;
  j["schema"] = "kpc.dev/trace/v1";
  j["backend"] = "iptables";  // the same document as an nftables trace (cmd_trace_nft.cpp) but for its rule positions
  nlohmann::ordered_json p;
  p["src"] = pkt.src.str();
  p["dst"] = pkt.dst.str();
  p["proto"] = proto_name(pkt.proto);
  p["dport"] = pkt.dport;
  p["sport"] = pkt.sport ? nlohmann::ordered_json(*pkt.sport) : nlohmann::ordered_json(nullptr);
  p["from"] = origin_name(pkt.origin);
  p["in_iface"] = pkt.in_iface ? nlohmann::ordered_json(*pkt.in_iface) : nlohmann::ordered_json(nullptr);
  p["out_iface"] = pkt.out_iface ? nlohmann::ordered_json(*pkt.out_iface) : nlohmann::ordered_json(nullptr);
  p["in_bridge_port"] = pkt.in_bridge_port ? nlohmann::ordered_json(*pkt.in_bridge_port) : nlohmann::ordered_json(nullptr);
  p["out_bridge_port"] = pkt.out_bridge_port ? nlohmann::ordered_json(*pkt.out_bridge_port) : nlohmann::ordered_json(nullptr);
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
    x["verdict"] = verdict_name(o.verdict);
    x["route"] = o.route.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.route);
    x["dnat"] = o.dnat ? nlohmann::ordered_json(o.dnat_text) : nlohmann::ordered_json(nullptr);
    x["masquerade"] = o.masquerade;
    x["snat"] = o.snat_text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.snat_text);
    x["mark"] = hex(o.final_mark);
    x["options"] = o.options.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.options);
    x["affinity"] = affinity_text(o.affinity, [](const std::string& l) { return l; });
    x["services"] = o.services;
    if (o.verdict == Verdict::Unknown) x["unknown"] = o.unknown_reason;
    nlohmann::ordered_json path = nlohmann::ordered_json::array();
    for (const auto& s : o.path) {
      nlohmann::ordered_json st;
      static const char* kinds[] = {"rule", "not-taken", "policy", "unknown"};
      st["kind"] = kinds[s.kind];
      st["table"] = ir::table_name(s.table);
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
  for (const auto& d : distribution(r)) {
    nlohmann::ordered_json x;
    x["probability"] = probability_json(d.probability);
    x["verdict"] = verdict_name(d.verdict);
    x["dnat"] = d.dnat_text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(d.dnat_text);
    x["masquerade"] = d.masquerade;
    if (!d.unknown_reason.empty()) x["unknown"] = d.unknown_reason;
    x["outcomes"] = d.outcomes;
    dist.push_back(x);
  }
  j["distribution"] = dist;
  j["total_probability"] = probability_json(r.total());
  // Invalid UTF-8 in a comment must not abort the dump.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

int run_nft(const TraceCliOptions& o, std::optional<std::string_view> text) {
  if (o.kube_proxy_test) return bad("--kube-proxy-test reads iptables rules only (not nftables input)");
  if (!o.ipsets.empty()) return bad("--ipsets is for iptables rules (nftables input has its sets)");
  if (o.flavor_given) return bad("--flavor is for iptables rules (not nftables input)");
  if (o.jumps_given) return bad("--jumps is for iptables rules (not nftables input)");
  if (!o.in_bridge_port.empty() || !o.out_bridge_port.empty() || o.no_bridge_port || o.routed)
    return bad("bridge ports (--in-bridge-port, --out-bridge-port, --no-bridge-port, --routed) are for iptables "
               "rules (-m physdev; not nftables input)");
  if (!o.ctmark.empty()) return bad("--ctmark is for iptables rules (not nftables input: ct mark is not modelled)");
  NftTraceRequest r;
  r.rules = o.rules;
  r.text = text;
  r.src = o.src, r.dst = o.dst, r.proto = o.proto, r.from = o.from;
  r.dport = o.dport, r.sport = o.sport;
  r.local_addresses = o.local_addresses;
  r.in_iface = o.in_iface, r.out_iface = o.out_iface, r.mark = o.mark, r.ctstate = o.ctstate;
  r.affinity = o.affinity;
  r.affinity_age = o.affinity_age;
  r.format = o.format;
  r.max_outcomes = o.max_outcomes;
  r.expect_dnat = o.expect_dnat;
  r.expect_verdict = o.expect_verdict;
  r.expect_masquerade = o.expect_masquerade;
  r.max_input_size = o.max_input_size;
  r.node = o.node;
  r.kube_proxy_version = o.kube_proxy_version;
  r.kernel_numgen = o.numgen == "kernel";
  r.verbose = o.verbose;
  return run_trace_nft(r);
}

int run_ipvs(const TraceCliOptions& o) {
  if (o.kube_proxy_test) return bad("--kube-proxy-test reads iptables rules only (not an IPVS program set)");
  if (!o.ipsets.empty()) return bad("--ipsets is for iptables rules (an IPVS program set has its ipset.rules)");
  if (o.flavor_given) return bad("--flavor is for iptables rules (not an IPVS program set)");
  if (o.jumps_given) return bad("--jumps is for iptables rules (kube-proxy's IPVS-mode jumps are always added)");
  if (!o.ctmark.empty()) return bad("--ctmark is for iptables rules (not an IPVS program set)");
  if (o.version_given) return bad("--kube-proxy-version is for nftables (--backend nftables)");
  if (o.numgen_given) return bad("--numgen is for nftables input");
  IpvsTraceRequest r;
  r.rules = o.rules;
  r.src = o.src, r.dst = o.dst, r.proto = o.proto, r.from = o.from;
  r.dport = o.dport, r.sport = o.sport;
  r.local_addresses = o.local_addresses;
  r.in_iface = o.in_iface, r.out_iface = o.out_iface, r.mark = o.mark, r.ctstate = o.ctstate;
  r.in_bridge_port = o.in_bridge_port, r.out_bridge_port = o.out_bridge_port;
  r.no_bridge_port = o.no_bridge_port, r.routed = o.routed;
  r.affinity = o.affinity;
  r.affinity_age = o.affinity_age;
  r.shares = o.ipvs_shares;
  r.format = o.format;
  r.max_outcomes = o.max_outcomes;
  r.expect_dnat = o.expect_dnat;
  r.expect_verdict = o.expect_verdict;
  r.expect_masquerade = o.expect_masquerade;
  r.max_input_size = o.max_input_size;
  r.node = o.node;
  r.verbose = o.verbose;
  return run_trace_ipvs(r);
}

// The mode, decided once (compiler/driver/input_kind.h): --backend, else RULES' content, else
// the snapshot's KubeProxyConfiguration.mode. nullopt with the reason printed.
std::optional<BackendKind> decide_mode(TraceCliOptions& o) {
  InputEvidence ev;
  InputError ie;
  if (!classify_input(o.rules, o.max_input_size, &ev, &ie)) {
    print_input_error(ie);
    return std::nullopt;
  }
  ModeDecision d;
  if (!resolve_command_mode("kpc trace", o.backend, o.backend_given, &o.flavor, o.flavor_given, {ev}, false, &d))
    return std::nullopt;
  if (d.mode) return d.mode;
  if (ev.kind == InputKind::Snapshot)
    return snapshot_mode(o.rules, o.max_input_size, o.node).value_or(BackendKind::IPTables);
  return BackendKind::IPTables;  // an empty rule set
}

int run(TraceCliOptions& o) {
  using namespace verifier::trace;
  auto mode = decide_mode(o);
  if (!mode) return kExitError;
  if (*mode == BackendKind::IPVS) return run_ipvs(o);
  if (o.ipvs_shares_given) return bad("--ipvs-shares is for an IPVS program set (--backend ipvs)");
  if (*mode == BackendKind::NFTables) return run_nft(o, std::nullopt);
  if (o.backend != "ip6tables") o.backend = "iptables";
  o.backend_given = true;  // decided: a snapshot is compiled with it whatever its configuration says
  IPFamily family = o.backend == "ip6tables" ? IPFamily::V6 : IPFamily::V4;
  verifier::Flavor flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;

  Packet pkt;
  auto src = IPAddr::parse(o.src), dst = IPAddr::parse(o.dst);
  if (!src) return bad("--src: not an IP address: " + o.src);
  if (!dst) return bad("--dst: not an IP address: " + o.dst);
  if (src->family != family || dst->family != family)
    return bad(std::string("--src/--dst must be ") + family_name(family) + " addresses for --backend " + o.backend);
  pkt.src = *src;
  pkt.dst = *dst;
  auto proto = proto_from_name(o.proto);
  if (!proto) return bad("--proto: expected tcp, udp or sctp");
  pkt.proto = *proto;
  if (o.dport < 0 || o.dport > 65535) return bad("--dport: expected 0..65535");
  pkt.dport = static_cast<uint16_t>(o.dport);
  if (o.sport > 65535) return bad("--sport: expected 0..65535");
  if (o.sport >= 0) pkt.sport = static_cast<uint16_t>(o.sport);
  pkt.origin = *origin_from_name(o.from);
  if (!o.in_iface.empty())
    pkt.in_iface = o.in_iface;
  else if (pkt.origin == Origin::External)
    pkt.in_iface = "eth0";
  if (!o.out_iface.empty()) pkt.out_iface = o.out_iface;
  if (!o.in_bridge_port.empty() && o.no_bridge_port) return bad("--in-bridge-port and --no-bridge-port exclude each other");
  if (!o.out_bridge_port.empty() && o.routed) return bad("--out-bridge-port and --routed exclude each other");
  if (!o.out_bridge_port.empty() && o.no_bridge_port)
    return bad("--out-bridge-port: a bridged packet entered through a bridge port (not --no-bridge-port)");
  if (!o.in_bridge_port.empty()) pkt.in_bridge_port = o.in_bridge_port;
  if (o.no_bridge_port) pkt.in_bridge_port = std::string(), pkt.out_bridge_port = std::string();
  if (!o.out_bridge_port.empty()) pkt.out_bridge_port = o.out_bridge_port;
  if (o.routed) pkt.out_bridge_port = std::string();
  if (!parse_u32(o.mark, &pkt.mark)) return bad("--mark: expected a 32-bit number");
  auto ct = ir::parse_ctstate(o.ctstate);
  if (!ct || !*ct) return bad("--ctstate: expected NEW, ESTABLISHED, RELATED, INVALID or UNTRACKED");
  pkt.ctstate = *ct;
  if (!o.ctmark.empty()) {
    uint32_t v = 0;
    if (!parse_u32(o.ctmark, &v)) return bad("--ctmark: expected a 32-bit number");
    pkt.ctmark = v;
  }

  TraceOptions topt;
  topt.max_outcomes = o.max_outcomes;
  verifier::ipset::Table sets;
  if (!o.ipsets.empty()) {
    if (!read_ipsets(o.ipsets, o.max_input_size, &sets)) return kExitError;
    topt.ipsets = &sets;
  }
  for (const auto& s : o.local_addresses) {
    auto a = IPAddr::parse(s);
    if (!a) return bad("--local-address: not an IP address: " + s);
    topt.local_addresses.push_back(*a);
  }

  // RULES: an iptables-save dump or a restore program, read as --state is everywhere, or
  // a snapshot, compiled first (its Node's addresses are then the local ones).
  verifier::RulesetState state;
  RuleInput input;
  if (!open_rule_input(o.rules, o.max_input_size, &input)) return kExitError;
  if (o.version_given) return bad("--kube-proxy-version is for nftables (--backend nftables)");
  if (o.numgen_given) return bad("--numgen is for nftables input");
  RuleInputOptions ri;
  ri.backend = *backend_from_name(o.backend);
  ri.backend_given = o.backend_given;
  ri.flavor = flavor;
  ri.max_input_size = o.max_input_size;
  ri.node = o.node;
  std::vector<IPAddr> node_addresses;
  if (!read_rule_input(input, ri, &state, &node_addresses)) return kExitError;
  std::vector<std::string> notes;
  // Which addresses are the node's, and why (a NodePort on an address taken as not local
  // is traced as forwarded): given, the snapshot's Node, or named by the rules.
  if (topt.local_addresses.empty()) {
    if (!input.rules) {
      std::sort(node_addresses.begin(), node_addresses.end());
      node_addresses.erase(std::unique(node_addresses.begin(), node_addresses.end()), node_addresses.end());
      topt.local_addresses = node_addresses;
      for (const auto& a : node_addresses) notes.push_back("local address " + a.str() + ": the snapshot's Node");
    } else {
      std::vector<std::string> why;
      topt.local_addresses = local_addresses_of(state, &why);
      for (const auto& w : why) notes.push_back("local address " + w);
    }
    if (topt.local_addresses.empty())
      notes.push_back("no node address known (only loopback is local): a NodePort on another address is traced as "
                      "not local; give --local-address");
  }
  bool add_jumps = o.jumps == "yes" || (o.jumps == "auto" && verifier::trace::builtin_chains_empty(state));
  if (add_jumps) {
    std::string err;
    if (!add_kube_proxy_jumps(state, &err))
      return bad("kube-proxy's jump rules do not load with " + o.rules + ": " + err);
    notes.push_back("added the jump rules kube-proxy installs in the built-in chains outside its restore input");
  }

  if (o.kube_proxy_test) {
    std::vector<std::string> locals = o.local_addresses;
    auto kp = trace_kube_proxy_test(state, o.src, o.proto, o.dst, std::to_string(o.dport), locals);
    if (o.format == "json") {
      nlohmann::ordered_json j = json_document("kube-proxy-trace");
      j["output"] = kp.output;
      j["masq"] = kp.masq;
      j["matches"] = kp.matches;
      if (!kp.error.empty()) j["error"] = kp.error;
      print_json(std::move(j));
    } else {
      std::printf("output: %s\nmasq: %s\n", kp.output.c_str(), kp.masq ? "true" : "false");
      if (!kp.error.empty()) std::printf("error: %s\n", kp.error.c_str());
      std::printf("matched rules:\n");
      for (const auto& m : kp.matches) std::printf("  %s\n", m.c_str());
    }
    return kp.error.empty() ? kExitOk : kExitError;
  }

  for (const auto& a : o.affinity) {
    if (a == "new") continue;
    auto names = resolve_affinity(state, a);
    if (names.empty()) return bad("--affinity: no KUBE-SEP chain DNATs to " + a);
    pkt.remembered.insert(pkt.remembered.end(), names.begin(), names.end());
  }
  pkt.remembered_age = o.affinity_age;

  Tracer tracer(state, topt);
  TraceResult res = tracer.trace(pkt);
  res.notes.insert(res.notes.begin(), notes.begin(), notes.end());
  if (o.format == "json")
    print_json_text(to_json(pkt, topt, res));
  else if (!write_output("", o.verbose ? format_text(pkt, topt, res) : reviewer_text(format_text(pkt, topt, res))))
    return kExitError;
  // The assertions: every outcome must meet them; an Unknown outcome meets none.
  std::vector<OutcomeFacts> facts;
  for (const auto& oc : res.outcomes)
    facts.push_back({verdict_name(oc.verdict), oc.verdict == Verdict::Unknown, oc.unknown_reason,
                     oc.dnat ? std::optional<std::string>(oc.dnat_text) : std::nullopt, oc.masquerade,
                     oc.probability.fraction()});
  return check_expectations({o.expect_dnat, o.expect_verdict, o.expect_masquerade}, facts);
}

}  // namespace

void add_trace(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<TraceCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "trace",
      "Trace one packet through a ruleset (an iptables-save dump or a restore program, an nft transaction or "
      "`nft list` dump, or a snapshot): every outcome with "
      "its exact probability, verdict, DNAT destination and rule path (exit 0 traced, 2 bad input)");
  cmd->add_option("rules", o->rules,
                  "iptables-save dump or restore program, or a snapshot (file or directory, compiled first) ('-' for "
                  "stdin)")
      ->required();
  cmd->add_option("--src", o->src, "source address")->required();
  cmd->add_option("--dst", o->dst, "destination address")->required();
  cmd->add_option("--proto", o->proto, "tcp, udp or sctp")->capture_default_str();
  cmd->add_option("--dport", o->dport, "destination port")->required()->check(CLI::Range(0, 65535));
  cmd->add_option("--sport", o->sport, "source port (default: not given; a --sport test is then unknown)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--from", o->from, "where the packet comes from: pod, node (locally generated) or external")
      ->check(CLI::IsMember({"pod", "node", "external"}))
      ->capture_default_str();
  cmd->add_option("--local-address", o->local_addresses,
                  "the node's addresses (addrtype LOCAL; 127.0.0.0/8 and ::1 are always local)");
  cmd->add_option("--in-iface", o->in_iface,
                  "interface the packet arrives on (default: eth0 from external, not given from a pod: -i tests are "
                  "then unknown)");
  cmd->add_option("--out-iface", o->out_iface, "interface routing sends the packet out of (default: not given)");
  cmd->add_option("--in-bridge-port", o->in_bridge_port,
                  "bridge port the packet entered through (-m physdev; default: not given, physdev tests are then "
                  "unknown)");
  cmd->add_flag("--no-bridge-port", o->no_bridge_port, "the packet did not enter through a bridge port");
  cmd->add_option("--out-bridge-port", o->out_bridge_port,
                  "bridge port the packet is bridged to (FORWARD/POSTROUTING, after any DNAT)");
  cmd->add_flag("--routed", o->routed, "the packet is routed, not bridged (no out bridge port)");
  cmd->add_option("--mark", o->mark, "packet mark")->capture_default_str();
  cmd->add_option("--ctmark", o->ctmark,
                  "the connection's mark (CONNMARK) for a packet that is not NEW (a new connection's is 0; default: "
                  "not given, a test that reads it is then unknown)");
  cmd->add_option("--ctstate", o->ctstate, "conntrack state (NEW: the first packet of a connection)")
      ->capture_default_str();
  cmd->add_option("--affinity", o->affinity,
                  "session affinity: 'new' (a new client), or a remembered client's endpoint (KUBE-SEP-... chain or "
                  "IP:PORT)");
  cmd->add_option("--affinity-age", o->affinity_age,
                  "seconds since the remembered client was last seen (-m recent --seconds S finds it iff age < S)")
      ->capture_default_str();
  cmd->add_option("--jumps", o->jumps,
                  "add kube-proxy's jump rules from the built-in chains: auto (when the built-in chains are empty), "
                  "yes, no")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  cmd->add_option("--backend", o->backend,
                  "iptables, ip6tables, nftables or ipvs (default: from RULES' content; a directory holding "
                  "ipvs.rules is an IPVS program set; a snapshot is compiled with it)")
      ->check(CLI::IsMember({"iptables", "ip6tables", "nftables", "ipvs"}))
      ->capture_default_str();
  cmd->add_option("--kube-proxy-version", o->kube_proxy_version,
                  "with --backend nftables and a snapshot: the kube-proxy release whose nftables layout to compile")
      ->capture_default_str();
  cmd->add_option("--numgen", o->numgen,
                  "nftables: numgen random shares, uniform (exactly 1/N) or kernel (reciprocal_scale's split)")
      ->check(CLI::IsMember({"uniform", "kernel"}))
      ->capture_default_str();
  cmd->add_option("--ipvs-shares", o->ipvs_shares,
                  "ipvs: schedulers other than rr, wrr and fo (lc, wlc, sh, mh, ...) choose by connection counts or "
                  "a hash: exact (Unknown, naming the candidates) or weighted (assumed weight-proportional shares)")
      ->check(CLI::IsMember({"exact", "weighted"}))
      ->capture_default_str();
  add_ipsets_option(cmd, o->ipsets);
  add_flavor_option(cmd, o->flavor, "legacy or nft (how RULES is loaded)");
  add_format_option(cmd, o->format);
  cmd->add_option("--max-outcomes", o->max_outcomes, "stop exploring after this many outcomes")
      ->check(cli_checks::whole_number_at_least(1))
      ->capture_default_str();
  cmd->add_option("--expect-dnat", o->expect_dnat,
                  "assert the set of DNAT destinations (IP:PORT, [IPv6]:PORT; repeat or list): exit 1 otherwise");
  cmd->add_option("--expect-verdict", o->expect_verdict, "assert every outcome's verdict: exit 1 otherwise")
      ->check(CLI::IsMember({"ACCEPT", "DROP", "REJECT"}));
  cmd->add_option("--expect-masquerade", o->expect_masquerade, "assert masquerading of every outcome: exit 1 otherwise")
      ->check(CLI::IsMember({"yes", "no"}));
  add_max_input_size_option(cmd, o->max_input_size);
  add_node_option(cmd, o->node, " (when RULES is a snapshot)");
  cmd->add_flag("-v,--verbose", o->verbose, "text at full width: one line per rule of a path (default: lines of at "
                                            "most 100 columns, long rules continued on the next line)");
  cmd->add_flag("--kube-proxy-test", o->kube_proxy_test,
                "trace as kube-proxy's unit tests do (tracePacket): prints output and masq");
  cmd->footer(
      "Examples:\n"
      "  kpc trace v4.restore --src 10.244.1.50 --dst 10.96.30.30 --dport 9000 --from pod --in-iface cbr0\n"
      "  kpc trace cluster/ --src 203.0.113.7 --dst 192.168.0.10 --dport 30080    (a snapshot, compiled first)\n"
      "  kpc trace node.save --src 10.0.0.1 --dst 10.96.0.1 --dport 443 --ipsets sets.save --affinity new\n"
      "  kpc trace ruleset.nft --src 10.0.0.1 --dst 10.96.0.1 --dport 443 --from pod   (nft list ruleset / kpc "
      "compile --backend nftables)\n"
      "  kpc trace cluster/ --backend nftables --src 10.0.0.1 --dst 10.96.0.1 --dport 443\n"
      "  kpc trace out/ --src 10.244.1.50 --dst 10.96.0.10 --proto udp --dport 53 --from pod   (kpc compile "
      "--backend ipvs -o out/)\n"
      "Exit codes: 0 traced (also when outcomes are unknown), 2 bad input.");
  cmd->callback([cmd, o, &exit_code] {
    if (o->verbose && o->format != "text") throw_verbose_needs_text();
    o->backend_given = cmd->count("--backend") > 0;
    o->flavor_given = cmd->count("--flavor") > 0;
    o->jumps_given = cmd->count("--jumps") > 0;
    o->version_given = cmd->count("--kube-proxy-version") > 0;
    o->numgen_given = cmd->count("--numgen") > 0;
    o->ipvs_shares_given = cmd->count("--ipvs-shares") > 0;
    exit_code = run(*o);
  });
}

}  // namespace kpc::cli
