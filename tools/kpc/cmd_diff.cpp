// `kpc diff OLD NEW`: a behavioural diff of two rule sets (pre-upgrade checks).
// Each side is a rule file (iptables-save dump or restore program) or a snapshot
// (YAML/JSON file or directory), which is compiled first. Chain names, comments,
// counters and the order of rules that match disjoint traffic do not count; any
// packet class whose outcome changes does, reported by service with a witness.
// Exit 0 equivalent, 1 differences (or classes kpc cannot decide), 2 error.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "compiler/driver/compile.h"
#include "compiler/driver/input_kind.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/diff_cross.h"
#include "tools/kpc/text_layout.h"
#include "tools/kpc/trace_nft.h"
#include "tools/kpc/verify_nft.h"
#include "verifier/sem/report.h"
#include "verifier/symbolic/compare.h"
#include "verifier/trace/tracer.h"

namespace kpc::cli {
namespace {

struct DiffOptions {
  std::string old_input, new_input;
  std::string backend = "iptables";
  std::string flavor = "legacy";
  std::string format = "text";
  std::vector<std::string> local_addresses;
  std::string jumps = "auto";
  bool all_atoms = false;
  size_t max_classes = 2000;  ///< --max-classes: classes listed (0: every one)
  uint64_t max_input_size = kDefaultMaxInputSize;  ///< every input: rule files and snapshots
  bool backend_given = false;
  std::string ipsets;  ///< --ipsets: the node's ipsets (both sides)
  std::string node;    ///< --node: for sides that are snapshots
  bool verbose = false;
  // Across back ends (diff_cross.h):
  std::string from_backend, to_backend;
  bool show_known = false;
  std::string numgen = "nominal";
  std::string cross_engine = "auto";
};

int run_nft(const DiffOptions& o) {
  if (!o.ipsets.empty() || o.flavor != "legacy" || o.jumps != "auto") {
    print_error("kpc diff: --ipsets, --flavor and --jumps are for iptables input (not nftables)");
    return kExitError;
  }
  NftDiffRequest r;
  r.before = o.old_input;
  r.after = o.new_input;
  r.format = o.format;
  r.local_addresses = o.local_addresses;
  r.max_input_size = o.max_input_size;
  r.explore_all = o.all_atoms;
  r.max_classes = o.max_classes;
  r.node = o.node;
  r.verbose = o.verbose;
  return run_diff_nft(r);
}

CrossDiffRequest cross_request(const DiffOptions& o) {
  CrossDiffRequest r;
  r.a = o.old_input;
  r.b = o.new_input;
  r.from_backend = o.from_backend;
  r.to_backend = o.to_backend;
  r.v6 = o.backend == "ip6tables";
  r.format = o.format;
  r.show_known = o.show_known;
  r.verbose = o.verbose;
  r.kernel_numgen = o.numgen == "kernel";
  r.local_addresses = o.local_addresses;
  r.max_input_size = o.max_input_size;
  r.node = o.node;
  r.flavor = o.flavor;
  r.jumps = o.jumps;
  r.engine = o.cross_engine;
  return r;
}

int run(const DiffOptions& o) {
  verifier::RulesetState before, after;
  std::vector<IPAddr> local;
  std::string lb, la;
  std::vector<IPAddr> local_new;
  bool ok_new = false, ok_old = false;
  RuleInput old_side, new_side;
  bool opened_old = open_rule_input(o.old_input, o.max_input_size, &old_side);  // both, to report both
  bool opened_new = open_rule_input(o.new_input, o.max_input_size, &new_side);
  RuleInputOptions in;
  in.backend = *backend_from_name(o.backend == "nftables" ? "iptables" : o.backend);
  in.backend_given = true;  // decided already (decide_mode): a snapshot side is compiled with it
  in.flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  in.max_input_size = o.max_input_size;
  in.node = o.node;
  lb = o.old_input;
  la = o.new_input;
  if (!opened_old || !opened_new) return kExitError;
  if (old_side.rules && new_side.rules) {
    // Two rule files share most of their lines: one store, read one after the other,
    // so the new side's lines are known from the old side (and rules compare by id).
    // Reading a large file parses on two threads already (apply_text).
    auto store = std::make_shared<verifier::RuleStore>();
    ok_old = read_rule_input(old_side, in, &before, &local, store);
    ok_new = read_rule_input(new_side, in, &after, &local_new, store);
  } else {
    // Snapshots are compiled first: the two sides are independent, read on two threads.
    std::thread reader([&] { ok_new = read_rule_input(new_side, in, &after, &local_new); });
    ok_old = read_rule_input(old_side, in, &before, &local);
    reader.join();
  }
  if (!ok_old || !ok_new) return kExitError;
  local.insert(local.end(), local_new.begin(), local_new.end());
  // Which addresses are the node's, and why: given, the snapshots' Nodes, named by the
  // rules themselves (nodePortAddresses, SNAT), or one stand-in no rule names.
  std::string local_why = !o.local_addresses.empty() ? "given" : !local.empty() ? "the snapshots' Nodes" : "";
  std::vector<std::string> inferred;
  if (o.local_addresses.empty() && local.empty()) {
    for (const auto* st : {&before, &after})
      for (const auto& a : local_addresses_of(*st, &inferred)) local.push_back(a);
    local_why = local.empty() ? "none known: a stand-in no rule names (NodePorts on other addresses are taken as "
                                "not local; give --local-address)"
                              : "named by the rules";
  }
  if (!choose_local_addresses(o.local_addresses, local, before.family, "diff", &local)) return kExitError;
  for (auto* st : {&before, &after}) {
    bool add = o.jumps == "yes" || (o.jumps == "auto" && verifier::trace::builtin_chains_empty(*st));
    std::string err;
    if (add && !verifier::trace::add_kube_proxy_jumps(*st, &err)) {
      std::fprintf(stderr, "kpc diff: cannot add kube-proxy's jumps: %s\n", err.c_str());
      return kExitError;
    }
  }
  verifier::ipset::Table sets;
  if (!o.ipsets.empty() && !read_ipsets(o.ipsets, o.max_input_size, &sets)) return kExitError;
  verifier::sem::CompareOptions co;
  co.local_addresses = local;
  if (!o.ipsets.empty()) co.ipsets = &sets;
  co.explore_all = o.all_atoms;
  co.max_reported = o.max_classes ? o.max_classes : SIZE_MAX;
  auto r = verifier::symbolic::compare_states(before, after, co);
  verifier::sem::ReportOptions ro;
  ro.before_name = "old";
  ro.after_name = "new";
  ro.verbose = o.verbose;
  std::string report = o.format == "json"       ? verifier::sem::diff_json(r, ro)
                       : o.format == "markdown" ? "### kpc diff `" + lb + "` → `" + la + "`\n\n" +
                                                      verifier::sem::diff_markdown(r, ro)
                                                : verifier::sem::diff_text(r, ro);
  if (o.format == "text") {
    std::string head = "kpc diff " + lb + " -> " + la + " (" + o.backend + ", local addresses:";
    for (const auto& a : local) head += " " + a.str();
    head += " — " + local_why + ")\n";
    std::sort(inferred.begin(), inferred.end());
    inferred.erase(std::unique(inferred.begin(), inferred.end()), inferred.end());
    for (const auto& w : inferred) head += "  local address " + w + "\n";
    report = head + report;
    if (!o.verbose) report = reviewer_text(report);
  }
  if (o.format == "json")
    print_json_text(report);
  else
    std::fputs(report.c_str(), stdout);
  if (!r.self_check_failures.empty()) return kExitInternal;
  return r.equivalent() ? kExitOk : kExitDifferent;
}

// Which engine answers, decided once (compiler/driver/input_kind.h): --from/--to-backend ask for
// the cross-mode diff; else --backend, else the two inputs' content, else the snapshots'
// KubeProxyConfiguration.mode. Sides of different modes are a cross-mode diff, said in its
// first line; sides of one mode are compared by that mode's symbolic front end. Streams are
// read once and replayed, so a pipe gives the answer the same file gives.
int dispatch(DiffOptions& o, CLI::App* cmd) {
  CrossDiffRequest cross = cross_request(o);
  auto refuse_cross_flags = [&]() {
    if (o.show_known || cmd->count("--numgen") || cmd->count("--cross-engine")) {
      print_error("kpc diff: --show-known, --numgen and --cross-engine are for a diff across modes (--from-backend/--to-backend, "
                  "or two programs of different modes)");
      return true;
    }
    return false;
  };
  auto run_cross = [&]() {
    if (cmd->count("--max-classes")) {
      print_error("kpc diff: --max-classes is for a diff within one mode (across modes every Service is reported)");
      return kExitError;
    }
    return run_diff_cross(cross);
  };
  if (!o.from_backend.empty() || !o.to_backend.empty() || o.new_input.empty()) {
    if (o.backend_given && o.backend == "nftables") {
      print_error("kpc diff: --backend nftables names one mode; across modes give --from-backend and --to-backend");
      return kExitError;
    }
    return run_cross();
  }
  std::vector<InputEvidence> ev(2);
  InputError ie;
  for (int k = 0; k < 2; ++k)
    if (!classify_input(k ? o.new_input : o.old_input, o.max_input_size, &ev[k], &ie)) {
      print_input_error(ie);
      return kExitError;
    }
  ModeDecision d;
  std::string flavor = o.flavor;  // diff takes --flavor as given (its default is legacy)
  if (!resolve_command_mode("kpc diff", o.backend, o.backend_given, &flavor, true, ev, true, &d)) return kExitError;
  // Each side's mode: its content's, else the decision's, else its snapshot's configuration.
  std::optional<BackendKind> side[2];
  for (int k = 0; k < 2; ++k) {
    side[k] = ev[k].mode();
    if (!side[k] && !d.mixed) side[k] = d.mode;
  }
  for (int k = 0; k < 2; ++k)
    if (!side[k] && ev[k].kind == InputKind::Snapshot) {
      side[k] = snapshot_mode(k ? o.new_input : o.old_input, o.max_input_size, o.node);
      if (!side[k]) side[k] = BackendKind::IPTables;  // it does not load: the iptables path reports why
    }
  for (int k = 0; k < 2; ++k)
    if (!side[k]) side[k] = side[1 - k];  // an empty input takes the other's mode
  if (!side[0]) side[0] = side[1] = BackendKind::IPTables;  // two empty inputs
  if (*side[0] != *side[1]) {
    cross.from_backend = backend_kind_name(*side[0]);
    cross.to_backend = backend_kind_name(*side[1]);
    return run_cross();
  }
  if (refuse_cross_flags()) return kExitError;
  switch (*side[0]) {
    case BackendKind::NFTables:
      return run_nft(o);
    case BackendKind::IPVS:
      // Two IPVS program sets: only the concrete tracer reads IPVS (its coverage is stated).
      cross.from_backend = cross.to_backend = "ipvs";
      return run_cross();
    default:
      if (o.backend == "nftables") o.backend = "iptables";
      return run(o);
  }
}

}  // namespace

void add_diff(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DiffOptions>();
  CLI::App* cmd = app.add_subcommand(
      "diff", "Behavioural diff of two rule sets or snapshots: packet classes whose outcome changes, by service "
              "(exit 0 equivalent, 1 differences, 2 error)");
  cmd->add_option("old", o->old_input,
                  "the old side: a rule file (save dump / restore program), or a snapshot file or directory")
      ->required();
  cmd->add_option("new", o->new_input, "the new side (omitted: OLD is a snapshot compiled with --from-backend and --to-backend)");
  cmd->add_option("--backend", o->backend,
                  "iptables, ip6tables or nftables (default: told from the files' content; across back ends, ip6tables compares the IPv6 programs)")
      ->check(CLI::IsMember({"iptables", "ip6tables", "nftables"}))
      ->capture_default_str();
  cmd->add_option("--from-backend", o->from_backend,
                  "across back ends: the old side's mode (a snapshot is compiled with it; ipvs: also a directory "
                  "kpc compile --backend ipvs -o wrote)")
      ->check(CLI::IsMember({"iptables", "nftables", "ipvs"}));
  cmd->add_option("--to-backend", o->to_backend, "across back ends: the new side's mode")
      ->check(CLI::IsMember({"iptables", "nftables", "ipvs"}));
  cmd->add_option("--cross-engine", o->cross_engine,
                  "across modes: per-class (every packet class through both symbolic front ends; iptables and "
                  "nftables only), sample (representative packets through the concrete tracers), or auto (per class "
                  "up to 20,000 rules a side, by sample above; the report says which)")
      ->check(CLI::IsMember({"auto", "per-class", "sample"}))
      ->capture_default_str();
  cmd->add_flag("--show-known", o->show_known,
                "across back ends: list kube-proxy's documented mode differences, with counts, sources and an example each");
  cmd->add_option("--numgen", o->numgen,
                  "across back ends: nft numgen shares: nominal (exactly 1/N, as documented) or kernel (reciprocal_scale)")
      ->check(CLI::IsMember({"nominal", "kernel"}))
      ->capture_default_str();
  add_flavor_option(cmd, o->flavor, "legacy or nft restore semantics for rule files");
  cmd->add_option("--format", o->format, "text, json or markdown (a PR-comment-sized table by service)")
      ->check(CLI::IsMember({"text", "json", "markdown"}))
      ->capture_default_str();
  add_ipsets_option(cmd, o->ipsets);
  // One value per occurrence (repeat it for several): NEW is optional, so a list would swallow it.
  cmd->add_option("--local-address", o->local_addresses,
                  "the node's addresses, one per --local-address (default: the snapshots' node addresses, else one "
                  "address no rule names)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  cmd->add_option("--jumps", o->jumps,
                  "add kube-proxy's jumps from the built-in chains: auto (when a side has none), yes, no")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  cmd->add_flag("--all-atoms", o->all_atoms, "explore every destination class (skip the semantic-hash narrowing)");
  cmd->add_option("--max-classes", o->max_classes,
                  "list at most N differing packet classes (0: every one); the counts of classes and services are "
                  "always over every class")
      ->capture_default_str();
  add_max_input_size_option(cmd, o->max_input_size);
  add_node_option(cmd, o->node, " (for a side that is a snapshot)");
  cmd->add_flag("-v,--verbose", o->verbose, "also the comparison's own words (destination atoms, start classes, leaves), each packet class's description and rule paths, at full width (default: a reviewer's text, lines of at most 100 columns)");
  cmd->footer(
      "Examples:\n"
      "  kpc diff old.restore new.restore                 two rule files (save dumps or restore programs)\n"
      "  kpc diff old-cluster/ new-cluster/               two snapshots, compiled first\n"
      "  kpc diff node.save new.restore --ipsets sets.save --local-address 10.0.0.5\n"
      "  kpc diff old/ new/ --format json --max-classes 0  every differing class listed (default: 2000)\n"
      "  kpc diff old.nft new.nft                         two nft transactions or `nft list ruleset` listings\n"
      "  kpc diff v4.restore v4.nft --show-known          across back ends (iptables -> nftables)\n"
      "  kpc diff cluster/ --from-backend iptables --to-backend nftables\n"
      "Exit codes: 0 equivalent, 1 differences or undecided classes, 2 error, 3 internal error.");
  cmd->callback([cmd, o, &exit_code] {
    if (o->verbose && o->format != "text") throw_verbose_needs_text();
    o->backend_given = cmd->count("--backend") > 0;
    exit_code = dispatch(*o, cmd);
  });
}

}  // namespace kpc::cli
