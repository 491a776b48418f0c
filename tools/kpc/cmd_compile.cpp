// `kpc compile SNAPSHOT... [--backend iptables|ip6tables|nftables|fastpath|ipvs] [--family ipv4|ipv6] [-o FILE|DIR]
//              [--prior OLD... | --prior-state NODE_STATE] [--full] [--stats] [--node NAME | --node all -o DIR]`
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "applier/core/nft_repair.h"
#include "applier/core/repair.h"
#include "compiler/driver/backend.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/compile_ipvs.h"
#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "compiler/proxy/node_context.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/ipvs_state.h"
#include "verifier/trace/tracer.h"

namespace kpc::cli {
namespace {

struct CompileOptions {
  std::vector<std::string> inputs;
  std::vector<std::string> prior;
  std::string prior_state;
  std::string flavor = "legacy";
  std::string backend = "iptables";
  std::string family;  ///< --family: "" = the back end's default (IPv4; ip6tables: IPv6)
  std::string kube_proxy_version = "1.35";  ///< --kube-proxy-version: the nftables layout
  std::string output;
  bool full = false;
  bool stats = false;
  bool backend_given = false;  ///< --backend named: else the snapshot's mode decides
  uint64_t max_input_size = kDefaultMaxInputSize;  ///< every input: snapshots and --prior-state
  std::string node;  ///< --node: a Node's name, or "all" (one program per Node and family, in -o DIR)
  std::string format = "text";  ///< json: kpc.dev/compile/v1 on stdout (the program in it without -o)
};

// --format json: one entry per program written, printed as kpc.dev/compile/v1 once the run succeeds.
nlohmann::ordered_json& json_programs() {
  static nlohmann::ordered_json programs = nlohmann::ordered_json::array();
  return programs;
}

// Writes a program where -o says; with --format json also describes it (entry: node, backend,
// family, sync and stats), the text itself in the document when it has no file.
bool emit_program(const CompileOptions& o, const std::string& path, const std::string& text,
                  nlohmann::ordered_json entry) {
  if (o.format != "json") return write_output(path, text);
  bool to_stdout = path.empty() || path == "-";
  if (!to_stdout && !write_output(path, text)) return false;
  entry["output"] = to_stdout ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(path);
  entry["bytes"] = text.size();
  if (to_stdout) entry["program"] = text;
  json_programs().push_back(std::move(entry));
  return true;
}

nlohmann::ordered_json program_entry(const std::string& node, const char* backend, IPFamily family,
                                     const char* sync) {
  nlohmann::ordered_json e;
  e["node"] = node.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(node);
  e["backend"] = backend;
  e["family"] = family == IPFamily::V4 ? "ipv4" : "ipv6";
  e["sync"] = sync;
  return e;
}

constexpr const char* kAllNodes = "all";

// --prior-state: the node's actual state (iptables-save output or a restore program)
// -> the smallest program that brings it to the full program's state.
int repair_from_state(const CompileOptions& o, const CompileResult& full) {
  auto flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  IPFamily family = o.backend == "ip6tables" ? IPFamily::V6 : IPFamily::V4;
  verifier::RulesetState actual;
  std::string error;
  if (!read_state(o.prior_state, family, flavor, o.max_input_size, &actual, &error)) {
    print_error(error);
    return kExitError;
  }
  // A node's dump (rules in its built-in chains) must keep kube-proxy's jumps there:
  // one missing is drift the repair puts back. A bare restore program has none by design.
  applier::RepairOptions ro;
  ro.flavor = flavor;
  ro.ensure_jumps = !verifier::trace::builtin_chains_empty(actual);
  auto r = applier::repair(actual, full.text, ro);
  if (!r.ok) {
    print_error("error[E0900]: " + o.prior_state + ": " + r.error);
    return kExitError;
  }
  auto entry = program_entry(o.node, "iptables", family, "repair");
  entry["stats"] = {{"chains_kept", r.stats.chains_kept},       {"chains_written", r.stats.chains_written},
                    {"chains_deleted", r.stats.chains_deleted}, {"rules", r.stats.rules_written},
                    {"jumps_restored", r.stats.jumps_restored}};
  if (!emit_program(o, o.output, r.program, std::move(entry))) return kExitError;
  if (o.stats)
    std::fprintf(stderr,
                 "repair: chains kept: %zu, chains written: %zu, chains deleted: %zu, rules: %zu, jumps restored: %zu, "
                 "bytes: %zu\n",
                 r.stats.chains_kept, r.stats.chains_written, r.stats.chains_deleted, r.stats.rules_written,
                 r.stats.jumps_restored, r.program.size());
  return kExitOk;
}

// --prior-state for nftables: the node's `nft list ruleset` / `nft list table` output (or a
// script applied to an empty state) -> the smallest transaction that brings its kube-proxy
// table to the full transaction's state (applier/core/nft_repair.h).
int repair_nft_from_state(const CompileOptions& o, const NftCompileResult& full, IPFamily family) {
  InputText text;
  InputError err;
  if (!text.load(o.prior_state, o.max_input_size, &err)) {
    print_input_error(err);
    return kExitError;
  }
  auto nft_family = family == IPFamily::V4 ? verifier::nft::Family::Ip : verifier::nft::Family::Ip6;
  // Only kube-proxy's table of the family is read from a listing: the node's other tables are
  // never touched, and may hold what the model does not read.
  applier::TableName only{nft_family, "kube-proxy"};
  verifier::nft::NftState actual;
  std::string error;
  if (!applier::read_nft_state(text.view(), o.prior_state, &actual, &error, &only)) {
    print_error("error[E0900]: " + o.prior_state + ": " + (error.ends_with("\n") ? error.substr(0, error.size() - 1) : error));
    return kExitError;
  }
  auto r = applier::repair_nft(actual, full.text, nft_family);
  if (!r.ok) {
    print_error("error[E0900]: " + o.prior_state + ": " + r.error);
    return kExitError;
  }
  const auto& s = r.stats;
  auto entry = program_entry(o.node, "nftables", family, "repair");
  entry["stats"] = {{"operations", s.operations},         {"chains_kept", s.chains_kept},
                    {"chains_rewritten", s.chains_rewritten}, {"chains_created", s.chains_created},
                    {"chains_recreated", s.chains_recreated}, {"chains_deleted", s.chains_deleted},
                    {"policies_set", s.policies_set},     {"rules", s.rules_written},
                    {"sets_kept", s.sets_kept},           {"sets_created", s.sets_created},
                    {"sets_recreated", s.sets_recreated}, {"sets_deleted", s.sets_deleted},
                    {"elements_added", s.elements_added}, {"elements_deleted", s.elements_deleted},
                    {"table_created", s.table_created},   {"table_recreated", s.table_recreated}};
  if (!emit_program(o, o.output, r.transaction, std::move(entry))) return kExitError;
  if (o.stats) {
    std::fprintf(stderr,
                 "repair: %zu operations, %zu bytes%s\n"
                 "chains: kept %zu, rewritten %zu, created %zu, re-created %zu, deleted %zu, policies set %zu; "
                 "rules %zu\n"
                 "sets/maps: kept %zu, created %zu, re-created %zu, deleted %zu; elements added %zu, deleted %zu\n",
                 s.operations, r.transaction.size(),
                 s.table_recreated ? " (table re-created: its comment or flags differed)"
                 : s.table_created ? " (table created)"
                                   : "",
                 s.chains_kept, s.chains_rewritten, s.chains_created, s.chains_recreated, s.chains_deleted,
                 s.policies_set, s.rules_written, s.sets_kept, s.sets_created, s.sets_recreated, s.sets_deleted,
                 s.elements_added, s.elements_deleted);
  }
  return kExitOk;
}

Backend iptables_backend(IPFamily f) { return f == IPFamily::V4 ? Backend::IPTables : Backend::IP6Tables; }

// What any back end's sync gives the command: the program text and how to describe it.
struct AnyResult {
  std::optional<CompileResult> ipt;
  std::optional<NftCompileResult> nft;
  std::optional<FastPathResult> fp;
  std::optional<IpvsCompileResult> ipvs;  ///< four files (kIpvsFiles), written into a directory
  const std::string& text() const { return ipt ? ipt->text : nft ? nft->text : fp->text; }
  bool partial() const { return ipt ? ipt->partial : nft ? nft->partial : false; }
  const std::string& full_sync_reason() const {
    static const std::string none;
    return ipt ? ipt->full_sync_reason : nft ? nft->full_sync_reason : none;
  }
  size_t changed() const { return ipt ? ipt->changed_services.size() : nft ? nft->changed_services.size() : 0; }
  explicit operator bool() const { return ipt || nft || fp || ipvs; }
};

// One full (or, with --prior, partial) sync for the snapshots as they are (their node chosen).
AnyResult compile_one(const CompileOptions& o, const Snapshot& next, const Snapshot& prior, Target target,
                      DiagSink& diags) {
  AnyResult r;
  switch (target.kind) {
    case BackendKind::IPTables: {
      Backend backend = iptables_backend(target.family);
      if (o.prior.empty()) {
        r.ipt = compile_iptables(next, backend, iptables::SyncOptions{}, diags);
      } else {
        PriorOptions po;
        po.force_full = o.full;
        r.ipt = compile_iptables_from_prior(next, prior, backend, po, diags);
      }
      break;
    }
    case BackendKind::NFTables: {
      std::string why;
      auto profile = nftables::layout_for_version(o.kube_proxy_version, &why);
      if (!profile) {
        diags.report(DiagCode::ModeNotCompiled, {}, "", "", "--kube-proxy-version: " + why);
        break;
      }
      if (o.prior.empty()) {
        NftOptions no;
        no.profile = *profile;
        no.keep_state = false;  // one sync, printed: nothing needs the proxier's state after it
        r.nft = compile_nftables(next, target.family, no, diags);
      } else {
        NftPriorOptions po;
        po.profile = *profile;
        po.force_full = o.full;
        r.nft = compile_nftables_from_prior(next, prior, target.family, po, diags);
      }
      break;
    }
    case BackendKind::FastPath:
      r.fp = compile_fastpath(next, o.prior.empty() ? nullptr : &prior, diags);
      break;
    case BackendKind::IPVS:
      if (!o.prior.empty()) {
        diags.report(DiagCode::ModeNotCompiled, {}, "", "",
                     "--prior with the ipvs back end: the sync from a prior state is not written yet (issue 17 §2); "
                     "kpc writes IPVS's full state");
        break;
      }
      r.ipvs = compile_ipvs(next, target.family, diags);
      break;
  }
  return r;
}

void print_nft_stats(const NftCompileResult& r) {
  auto s = nftables::transaction_stats(r.sync.tx);
  std::fprintf(stderr,
               "transaction: %zu operations (chains added %zu, flushed %zu, deleted %zu; rules %zu; elements added %zu, "
               "deleted %zu; sets/maps added %zu, deleted %zu), %zu bytes\n",
               s.operations, s.chains_added, s.chains_flushed, s.chains_deleted, s.rules, s.elements_added,
               s.elements_deleted, s.sets_added, s.sets_deleted, r.text.size());
  if (!r.sync.cleanup.empty())
    std::fprintf(stderr, "stale-chain cleanup transaction (run first, on its own): %zu operations\n",
                 r.sync.cleanup.num_operations());
  std::fprintf(stderr, "service ports written: %zu, endpoints: %zu, stale chains flushed: %zu\n",
               r.sync.services_written, r.sync.total_endpoints, r.sync.stale_chains_flushed.size());
}

void print_ipvs_stats(const IpvsCompileResult& r) {
  size_t entries = 0, rules = 0;
  for (const auto& s : r.program.sets) entries += s.entries.size();
  for (const auto& t : r.program.iptables.tables) rules += t.ops.size();
  std::fprintf(stderr,
               "ipvs: %zu virtual servers, %zu real servers; ipsets: %zu sets, %zu entries; iptables: %zu lines "
               "(chains and rules); kube-ipvs0: %zu addresses\n",
               r.program.virtual_servers.size(), r.program.real_servers, r.program.sets.size(), entries, rules,
               r.program.bound.size());
}

// The IPVS compile's files, into DIR (created): each replaced atomically.
bool write_ipvs_dir(const std::string& dir, const IpvsCompileResult& r) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    print_error("error[E0005]: " + dir + ": " + ec.message());
    return false;
  }
  for (const char* f : kIpvsFiles)
    if (!write_output(dir + "/" + f, ipvs_file_text(r, f))) return false;
  return true;
}

// --prior-state DIR for the ipvs back end (tools/kpc/ipvs_state.h): ipvs.rules and ipset.rules
// become the change scripts kube-proxy's sync would make (compiler/ipvs/sync.h); iptables.rules
// the repair of DIR/iptables.save when there is one (else kube-proxy's full restore, which is what
// it writes every sync); node.plan stays whole.
int sync_ipvs_from_state(const CompileOptions& o, IpvsCompileResult full, IPFamily family) {
  ipvs::PriorState prior;
  std::string error;
  if (!read_ipvs_prior_state(o.prior_state, family, o.max_input_size, &prior, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return kExitError;
  }
  auto r = ipvs::sync_from_prior(full.program, prior);
  if (!r.error.empty()) {
    std::fprintf(stderr, "error[E0900]: %s/ipset.save: %s\n", o.prior_state.c_str(), r.error.c_str());
    return kExitError;
  }
  std::string ipt_path = o.prior_state + "/iptables.save";
  std::error_code ec;
  if (std::filesystem::exists(ipt_path, ec)) {
    auto flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
    verifier::RulesetState actual;
    if (!read_state(ipt_path, family, flavor, o.max_input_size, &actual, &error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return kExitError;
    }
    applier::RepairOptions ro;
    ro.flavor = flavor;  // the IPVS jumps are kube-proxy's own (kube_jumps), not the iptables mode's
    auto rep = applier::repair(actual, full.iptables_rules, ro);
    if (!rep.ok) {
      std::fprintf(stderr, "error[E0900]: %s: %s\n", ipt_path.c_str(), rep.error.c_str());
      return kExitError;
    }
    full.iptables_rules = rep.program;
  }
  full.ipvs_rules = std::move(r.ipvs_rules);
  full.ipset_rules = std::move(r.ipset_rules);
  if (!write_ipvs_dir(o.output, full)) return kExitError;
  if (o.stats) {
    const auto& s = r.stats;
    std::fprintf(stderr,
                 "ipvs sync: virtual servers added %zu, edited %zu, deleted %zu; real servers added %zu, edited %zu, "
                 "deleted %zu, re-added %zu, draining %zu; ipsets created %zu, entries added %zu, deleted %zu\n",
                 s.vs_added, s.vs_edited, s.vs_deleted, s.rs_added, s.rs_edited, s.rs_deleted, s.rs_readded,
                 s.rs_draining, s.sets_created, s.entries_added, s.entries_deleted);
  }
  return kExitOk;
}

void print_sync_stats(const CompileOptions& o, const AnyResult& result) {
  if (result.ipvs) {
    print_ipvs_stats(*result.ipvs);
    return;
  }
  if (!o.prior.empty())
    std::fprintf(stderr, "sync: %s%s%s, changed services: %zu\n", result.partial() ? "partial" : "full",
                 result.full_sync_reason().empty() ? "" : " (",
                 result.full_sync_reason().empty() ? "" : (result.full_sync_reason() + ")").c_str(),
                 result.changed());
  if (result.ipt) {
    print_stats(result.ipt->sync, result.ipt->text.size());
  } else if (result.nft) {
    print_nft_stats(*result.nft);
  } else {
    auto s = nftables::transaction_stats(result.fp->tx);
    std::fprintf(stderr, "transaction: %zu operations (rules %zu; elements added %zu, deleted %zu), %zu bytes\n",
                 s.operations, s.rules, s.elements_added, s.elements_deleted, result.fp->text.size());
  }
}

// The counts --stats prints, as one flat object (kpc.dev/compile/v1 "stats").
nlohmann::ordered_json sync_stats_json(const AnyResult& result) {
  nlohmann::ordered_json j;
  if (result.ipvs) {
    const auto& p = result.ipvs->program;
    size_t entries = 0, lines = 0;
    for (const auto& set : p.sets) entries += set.entries.size();
    for (const auto& t : p.iptables.tables) lines += t.ops.size();
    j = {{"virtual_servers", p.virtual_servers.size()}, {"real_servers", p.real_servers},
         {"ipsets", p.sets.size()},                     {"ipset_entries", entries},
         {"iptables_lines", lines},                     {"bound_addresses", p.bound.size()}};
  } else if (result.ipt) {
    const auto& r = result.ipt->sync;
    j = {{"chains_written", r.chains_written}, {"chains_deleted", r.deleted_chains},
         {"rules", r.rules_written},           {"endpoints", r.total_endpoints},
         {"large_cluster", r.large_cluster}};
  } else {
    auto s = nftables::transaction_stats(result.nft ? result.nft->sync.tx : result.fp->tx);
    j = {{"operations", s.operations},         {"chains_added", s.chains_added},   {"chains_flushed", s.chains_flushed},
         {"chains_deleted", s.chains_deleted}, {"rules", s.rules},                 {"elements_added", s.elements_added},
         {"elements_deleted", s.elements_deleted}, {"sets_added", s.sets_added}, {"sets_deleted", s.sets_deleted}};
    if (result.nft) {
      j["cleanup_operations"] = result.nft->sync.cleanup.num_operations();
      j["service_ports"] = result.nft->sync.services_written;
      j["endpoints"] = result.nft->sync.total_endpoints;
      j["stale_chains_flushed"] = result.nft->sync.stale_chains_flushed.size();
    }
  }
  return j;
}

nlohmann::ordered_json sync_entry(const CompileOptions& o, const std::string& node, Target t,
                                  const AnyResult& result) {
  auto e = program_entry(node, backend_kind_name(t.kind), t.family, result.partial() ? "partial" : "full");
  if (t.kind == BackendKind::FastPath) e["family"] = nullptr;  // one inet table for both
  if (!o.prior.empty()) {
    e["full_sync_reason"] = result.full_sync_reason().empty() ? nlohmann::ordered_json(nullptr)
                                                              : nlohmann::ordered_json(result.full_sync_reason());
    e["changed_services"] = result.changed();
  }
  e["stats"] = sync_stats_json(result);
  return e;
}

// Writes one sync's output where -o says (ipvs: its four files into the directory) and, with
// --format json, describes it.
bool emit_result(const CompileOptions& o, const std::string& path, const std::string& node, Target t,
                 const AnyResult& result) {
  if (!result.ipvs) return emit_program(o, path, result.text(), sync_entry(o, node, t, result));
  if (!write_ipvs_dir(path, *result.ipvs)) return false;
  if (o.format == "json") {
    auto e = sync_entry(o, node, t, result);
    size_t bytes = 0;
    for (const char* f : kIpvsFiles) bytes += ipvs_file_text(*result.ipvs, f).size();
    e["output"] = path;  // a directory: ipvs.rules, ipset.rules, iptables.rules, node.plan
    e["bytes"] = bytes;
    json_programs().push_back(std::move(e));
  }
  return true;
}

// The file --node all writes for one node and target.
std::string program_file_name(Target t) {
  if (t.kind == BackendKind::IPTables) return t.family == IPFamily::V4 ? "iptables.restore" : "ip6tables.restore";
  if (t.kind == BackendKind::FastPath) return "fastpath.nft";
  if (t.kind == BackendKind::IPVS) return t.family == IPFamily::V4 ? "ipvs-ipv4" : "ipvs-ipv6";  // a directory
  return std::string(backend_kind_name(t.kind)) + (t.family == IPFamily::V4 ? "-ipv4.nft" : "-ipv6.nft");
}

bool context_for(const Snapshot& snap, Target t, DiagSink& diags) {
  if (t.kind == BackendKind::IPTables || t.kind == BackendKind::IPVS)
    return node_context_for(snap, iptables_backend(t.family), diags).has_value();
  if (t.kind == BackendKind::FastPath) return true;
  return nft_node_context(snap, t.family, diags).has_value();
}

// --node all -o DIR: DIR/<node>/iptables.restore and DIR/<node>/ip6tables.restore, for the
// families each Node has (with --backend: that family only). Every Node's context is checked
// before anything is written, so an error leaves DIR as it was.
int run_all_nodes(const CompileOptions& o, std::optional<Target> given, Snapshot& next, Snapshot& prior,
                  SourceManager& sm, DiagSink& diags) {
  std::vector<Target> backends;
  if (given) {
    backends.push_back(*given);
  } else {
    for (IPFamily f : {IPFamily::V4, IPFamily::V6})
      if (auto t = target_for_mode(next, f, diags)) backends.push_back(*t);
  }
  if (next.nodes.empty())
    diags.report(DiagCode::NodeUnknown, {}, "", "", "--node all: the snapshot has no Node objects");
  std::vector<std::pair<std::string, Target>> jobs;
  std::vector<std::string> skipped;
  for (const auto& node : next.nodes) {
    const std::string& name = node.meta.name;
    if (!select_node(&next, name, sm, diags) || (!o.prior.empty() && !select_node(&prior, name, sm, diags))) continue;
    size_t before = jobs.size();
    DiagSink unavailable;  // a family the Node has no address of is not compiled (kube-proxy runs no such proxier)
    for (Target b : backends) {
      DiagSink ctx_diags;
      if (context_for(next, b, ctx_diags)) {
        jobs.emplace_back(name, b);
        for (const auto& d : ctx_diags.all()) diags.report(d);
      } else {
        for (const auto& d : ctx_diags.all()) (d.code == DiagCode::FamilyUnavailable ? unavailable : diags).report(d);
      }
    }
    if (jobs.size() != before) continue;
    if (!given) {  // no family at all: an error, not a silently missing node
      for (const auto& d : unavailable.all()) diags.report(d);
    } else if (!unavailable.all().empty()) {  // said, though it is no error: this node gets no program
      skipped.push_back(name);
    }
  }
  for (const auto& name : skipped)
    std::fprintf(stderr, "note: Node %s has no %s address: no %s program (kube-proxy runs no such proxier there)\n",
                 name.c_str(), family_name(backends[0].family), o.backend.c_str());
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (diags.has_errors()) return kExitError;
  std::error_code ec;
  std::filesystem::create_directories(o.output, ec);
  if (ec) {
    print_error("error[E0005]: " + o.output + ": " + ec.message());
    return kExitError;
  }
  for (const auto& [name, backend] : jobs) {
    select_node(&next, name, sm, diags);
    if (!o.prior.empty()) select_node(&prior, name, sm, diags);
    DiagSink quiet;  // reported above already
    auto result = compile_one(o, next, prior, backend, quiet);
    if (!result) {
      print_diagnostics(quiet, sm);
      return kExitError;
    }
    std::string dir = o.output + "/" + name;
    std::filesystem::create_directories(dir, ec);
    std::string path = dir + "/" + program_file_name(backend);
    if (ec) {
      print_error("error[E0005]: " + dir + ": " + ec.message());
      return kExitError;
    }
    if (!emit_result(o, path, name, backend, result)) return kExitError;
    if (o.stats) {
      std::fprintf(stderr, "%s:\n", path.c_str());
      print_sync_stats(o, result);
    }
  }
  return kExitOk;
}

int run(const CompileOptions& o) {
  if (refuse_non_snapshots("compile", o.inputs, o.max_input_size)) return kExitError;
  SourceManager sm;
  DiagSink diags;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  bool all_nodes = o.node == kAllNodes;
  if (!all_nodes) lo.node_name = o.node;
  Snapshot next, prior;
  bool ok = load_snapshot(o.inputs, lo, sm, &next, diags);
  if (!o.prior.empty()) ok = load_snapshot(o.prior, lo, sm, &prior, diags) && ok;
  // The one choice of back end: as asked, else the snapshot's mode (kube-proxy's choice).
  std::optional<Target> given;
  if (o.backend_given || !o.family.empty()) {
    std::string error;
    given = parse_backend(o.backend, o.family.empty() ? std::nullopt : parse_family(o.family), &error);
    if (!given) {
      std::fprintf(stderr, "error: %s\n", error.c_str());
      return kExitError;
    }
    if (given->kind == BackendKind::FastPath && !o.family.empty()) {
      std::fprintf(stderr, "error: --family: the fast path is one inet table for both families\n");
      return kExitError;
    }
  }
  if (ok && all_nodes) return run_all_nodes(o, o.backend_given ? given : std::nullopt, next, prior, sm, diags);
  AnyResult result;
  std::optional<Target> target = given;
  if (ok && !o.backend_given) target = target_for_mode(next, given ? given->family : IPFamily::V4, diags);
  if (ok && target && !o.prior_state.empty() && target->kind == BackendKind::FastPath) {
    diags.report(DiagCode::ModeNotCompiled, {}, "", "",
                 "--prior-state repairs iptables and nftables nodes; the fast-path table has no drift repair yet");
    target.reset();
  }
  if (ok && target && target->kind == BackendKind::IPVS) {
    if (o.output.empty() || o.output == "-") {
      diags.report(DiagCode::ModeNotCompiled, {}, "", "",
                   "the ipvs back end writes four files (ipvs.rules, ipset.rules, iptables.rules, node.plan): give "
                   "-o DIR");
      target.reset();
    }
  }
  if (ok && target) result = compile_one(o, next, prior, *target, diags);
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (!result) return kExitError;
  if (!o.prior_state.empty() && result.ipvs) return sync_ipvs_from_state(o, std::move(*result.ipvs), target->family);
  if (!o.prior_state.empty())
    return result.nft ? repair_nft_from_state(o, *result.nft, target->family) : repair_from_state(o, *result.ipt);
  DiagSink quiet;  // the node's name, as the compile chose it (reported above if it failed)
  auto node = o.format == "json" ? proxy::resolve_node_name(next, quiet) : std::nullopt;
  if (!emit_result(o, o.output, node ? *node : o.node, *target, result)) return kExitError;
  if (o.stats) print_sync_stats(o, result);
  return kExitOk;
}

}  // namespace

std::optional<std::string> compile_program(const Snapshot& snap, Target target, const std::string& kube_proxy_version,
                                           DiagSink& diags) {
  CompileOptions o;
  o.kube_proxy_version = kube_proxy_version;
  Snapshot no_prior;
  if (target.kind == BackendKind::IPVS) {  // four files: not one program text
    bool from_mode = snap.config.mode == ProxyMode::IPVS && snap.config.fields.at("mode").known();
    diags.report(DiagCode::ModeNotCompiled, from_mode ? snap.config.fields.at("mode") : Pos{},
                 from_mode ? "KubeProxyConfiguration" : "", from_mode ? "mode" : "",
                 "the ipvs back end writes four files; this command compares one program per back end (use "
                 "`kpc compile --backend ipvs -o DIR`)");
    return std::nullopt;
  }
  auto r = compile_one(o, snap, no_prior, target, diags);
  if (!r) return std::nullopt;
  return r.text();
}

bool target_available(const Snapshot& snap, Target target, DiagSink& diags) { return context_for(snap, target, diags); }

void add_compile(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<CompileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compile", "Compile a snapshot into the program kube-proxy would write (iptables-restore input or nft transaction)");
  cmd->add_option("inputs", opts->inputs, "snapshot files or directories")->required();
  cmd->add_option("--backend", opts->backend,
                  "iptables, ip6tables (= iptables --family ipv6), nftables, fastpath (KEP-4963's inet "
                  "kube-proxy-fastpath table, both families), or ipvs (ipvs.rules, ipset.rules, iptables.rules and "
                  "node.plan in -o DIR); default: the snapshot's KubeProxyConfiguration.mode (iptables when unset), "
                  "as on a node")
      ->check(CLI::IsMember({"iptables", "ip6tables", "nftables", "fastpath", "ipvs"}))
      ->capture_default_str();
  cmd->add_option("--family", opts->family, "ipv4 or ipv6 (default ipv4; ip6tables: ipv6)")
      ->check(CLI::IsMember({"ipv4", "ipv6"}));
  cmd->add_option("--kube-proxy-version", opts->kube_proxy_version,
                  "the kube-proxy release whose nftables layout to write (1.33-1.35 share one; others are refused)")
      ->capture_default_str();
  cmd->add_option("--prior", opts->prior,
                  "the snapshot kube-proxy last synced successfully: write the partial restore (KEP-3453) "
                  "that brings the node from it to SNAPSHOT");
  cmd->add_option("--prior-state", opts->prior_state,
                  "what the node really has (iptables-save output, or a restore program; nftables: `nft list "
                  "ruleset` output, or an nft script): write the smallest program that brings it to SNAPSHOT's full "
                  "state (stale chains deleted, matching chains left out); ipvs: a directory with ipvs.save (ipvsadm "
                  "-S -n) and optionally ipvs.stats (ipvsadm -Ln), ipset.save, iptables.save: the change scripts of "
                  "kube-proxy's sync, graceful termination included")
      ->excludes("--prior");
  // Flags that would be ignored are errors (a user who wrote them meant something).
  add_flavor_option(cmd, opts->flavor, "with --prior-state: iptables-restore semantics to check the repair against")
      ->needs("--prior-state");
  cmd->add_flag("--full", opts->full, "with --prior: force a full sync (still deletes the prior's stale chains)")
      ->needs("--prior");
  cmd->add_option("-o,--output", opts->output,
                  "write the program here: a file is replaced atomically (mode kept, symlinks followed); a device, "
                  "FIFO or /dev/fd/N is written to; stdout when absent or -");
  cmd->add_flag("--stats", opts->stats, "print what the program writes (to stderr)");
  cmd->add_option("--format", opts->format,
                  "text (the program), or json (kpc.dev/compile/v1: each program's back end, family, sync kind, "
                  "--stats counts and diagnostics; the program text in it unless -o names a file)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  add_max_input_size_option(cmd, opts->max_input_size);
  add_node_option(cmd, opts->node,
                  "; `--node all`: one program per Node and family, DIR/<node>/iptables.restore and "
                  "DIR/<node>/ip6tables.restore (only the families the Node has an address of; with --backend, that "
                  "family only), with -o DIR");
  cmd->footer(
      "Examples:\n"
      "  kpc compile cluster/ -o v4.restore --stats        full sync, IPv4\n"
      "  kpc compile cluster/ --backend ip6tables          IPv6, to stdout\n"
      "  kpc compile cluster/ --backend nftables           kube-proxy's nftables transaction (nft -f)\n"
      "  kpc compile cluster/ --backend fastpath           KEP-4963's flowtable fast-path table\n"
      "  kpc compile cluster/ --backend ipvs -o out/       IPVS: ipvs.rules ipset.rules iptables.rules node.plan\n"
      "  kpc compile new/ --prior old/                     the partial restore of the next sync (KEP-3453)\n"
      "  kpc compile cluster/ --prior-state node.save      the smallest repair of a node's drift\n"
      "  kpc compile cluster/ --backend nftables --prior-state ruleset.nft   the same for an nftables node\n"
      "  kpc compile cluster/ -o v4.restore --format json  what was written, with --stats counts, as JSON\n"
      "Exit codes: 0 written, 2 error (located diagnostics on stderr; nothing written).");
  cmd->callback([cmd, opts, &exit_code] {
    opts->backend_given = cmd->count("--backend") > 0;
    if (opts->node == kAllNodes && (opts->output.empty() || opts->output == "-"))
      throw CLI::ValidationError("--node", "--node all writes one file per Node and family: give -o DIR");
    if (opts->node == kAllNodes && !opts->prior_state.empty())
      throw CLI::ValidationError("--node", "--node all cannot be combined with --prior-state (one node's state)");
    exit_code = run(*opts);
    if (opts->format == "json" && exit_code == kExitOk) {
      auto doc = json_document("compile");
      doc["programs"] = std::move(json_programs());
      print_json(std::move(doc));
    }
  });
}

}  // namespace kpc::cli
