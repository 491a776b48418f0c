// `kpc verify --state PRIOR --partial PARTIAL --full FULL` and `kpc verify NEW... --prior OLD...`:
// does applying the partial program to the prior state give the full program's state?
// Exit 0 identical (or equivalent with --allow-equivalent), 1 otherwise, 2 error.
#include <cstdio>
#include <filesystem>
#include <optional>

#include "compiler/driver/compile.h"
#include "compiler/driver/capabilities.h"
#include "compiler/driver/input_kind.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/text_layout.h"
#include "tools/kpc/trace_nft.h"
#include "tools/kpc/verify_nft.h"
#include "verifier/equiv/verify.h"

namespace kpc::cli {
namespace {

struct VerifyOptions {
  std::string state, partial, full;
  std::vector<std::string> next, prior;
  std::string backend = "iptables";
  std::string flavor = "legacy";
  std::string format = "text";
  bool allow_equivalent = false;
  std::vector<std::string> local_addresses;
  uint64_t max_input_size = kDefaultMaxInputSize;  ///< every input: snapshots and rule files
  bool backend_given = false;
  std::string ipsets;
  std::string node;  ///< --node (both snapshots)
  bool verbose = false;
  bool flavor_given = false;
};

// The mode, decided once (compiler/driver/input_kind.h): --backend, else the programs' content
// (an empty program, a sync with nothing to do, takes the others' mode), else the new
// snapshot's KubeProxyConfiguration.mode. False with the reason printed (exit 2).
bool decide_mode(VerifyOptions& o, BackendKind* mode) {
  if (o.backend == "fastpath" || o.backend == "ipvs") {
    print_error(refusal("verify", o.backend, kSnapshotDir));
    return false;
  }
  std::vector<InputEvidence> inputs;
  if (o.next.empty()) {
    for (const std::string* f : {&o.state, &o.partial, &o.full}) {
      if (f->empty()) continue;
      InputEvidence ev;
      InputError ie;
      if (!classify_input(*f, o.max_input_size, &ev, &ie)) {
        print_input_error(ie);
        return false;
      }
      if (ev.kind == InputKind::Snapshot || ev.kind == InputKind::IpvsProgramSet) {
        print_error("kpc verify: " + ev.where() + " is " + input_kind_phrase(ev.kind) +
                    ", not a program: --state, --partial and --full take iptables-save dumps / restore programs or "
                    "nft transactions / listings; for snapshots use kpc verify NEW --prior OLD");
        return false;
      }
      inputs.push_back(std::move(ev));
    }
  }
  ModeDecision d;
  if (!resolve_command_mode("kpc verify", o.backend, o.backend_given, &o.flavor, o.flavor_given, std::move(inputs),
                            false, &d))
    return false;
  if (d.mode) {
    *mode = *d.mode;
    return true;
  }
  if (o.next.empty()) {  // three empty programs: nothing says; iptables, kube-proxy's default mode
    *mode = BackendKind::IPTables;
    return true;
  }
  auto next = snapshot_mode(o.next[0], o.max_input_size, o.node);
  *mode = next.value_or(BackendKind::IPTables);  // one that does not load: the iptables path reports why
  if (*mode == BackendKind::IPVS) {
    print_error(refusal("verify", "ipvs", kSnapshotDir) + "\n  the snapshot's KubeProxyConfiguration.mode is ipvs");
    return false;
  }
  return true;
}

int run_nft(const VerifyOptions& o) {
  if (!o.ipsets.empty()) {
    print_error("kpc verify: --ipsets is for iptables rules (nftables input has its sets)");
    return kExitError;
  }
  if (o.flavor_given) {
    print_error("kpc verify: --flavor is for iptables rules (not nftables input)");
    return kExitError;
  }
  NftVerifyRequest r;
  r.state = o.state;
  r.partial = o.partial;
  r.full = o.full;
  r.next = o.next;
  r.prior = o.prior;
  r.format = o.format;
  r.verbose = o.verbose;
  r.allow_equivalent = o.allow_equivalent;
  r.local_addresses = o.local_addresses;
  r.max_input_size = o.max_input_size;
  r.node = o.node;
  return run_verify_nft(r);
}

// The three programs from snapshots: prior state = full(OLD) on an empty node.
bool compile_three(const VerifyOptions& o, Backend backend, std::string* prior, std::string* partial, std::string* full,
                   std::vector<IPAddr>* local) {
  SourceManager sm;
  DiagSink diags;
  Snapshot next_snap, prior_snap;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  lo.node_name = o.node;
  bool ok = load_snapshot(o.next, lo, sm, &next_snap, diags);
  ok = load_snapshot(o.prior, lo, sm, &prior_snap, diags) && ok;
  if (ok) ok = check_configured_mode(next_snap, o.backend_given, backend, diags);
  std::optional<CompileResult> a, b, c;
  if (ok) {
    a = compile_iptables(prior_snap, backend, {}, diags);
    b = compile_iptables_from_prior(next_snap, prior_snap, backend, {}, diags);
    PriorOptions full_sync;  // what a full sync on that prior writes (it deletes stale chains too)
    full_sync.force_full = true;
    c = compile_iptables_from_prior(next_snap, prior_snap, backend, full_sync, diags);
    append_node_addresses(next_snap, backend_family(backend), local);
  }
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (!a || !b || !c) return false;
  *prior = std::move(a->text);
  *partial = std::move(b->text);
  *full = std::move(c->text);
  return true;
}

int run(VerifyOptions& o) {
  BackendKind mode = BackendKind::IPTables;
  if (!decide_mode(o, &mode)) return kExitError;
  if (mode == BackendKind::NFTables) return run_nft(o);
  if (o.backend == "nftables") o.backend = "iptables";
  o.backend_given = true;  // decided: a snapshot whose configuration says otherwise is compiled as asked
  auto flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  Backend backend = *backend_from_name(o.backend);
  IPFamily family = backend_family(backend);
  verifier::RulesetState prior = verifier::RulesetState::empty(family);
  std::string partial, full, error;
  InputText partial_file, full_file;  // --partial/--full, mapped
  std::vector<IPAddr> local;
  if (!o.next.empty()) {
    std::string prior_program;
    if (!compile_three(o, backend, &prior_program, &partial, &full, &local)) return kExitError;
    verifier::ApplyOptions ao;
    ao.noflush = true;
    ao.flavor = flavor;
    if (auto res = verifier::apply_text(prior, prior_program, ao); !res.ok()) {
      std::fprintf(stderr, "internal error: the prior's full program fails: %s\n", res.error->reason.c_str());
      return kExitInternal;
    }
  } else {
    if (o.state.empty() || o.partial.empty() || o.full.empty()) {
      std::fprintf(stderr, "kpc verify: give --state, --partial and --full, or SNAPSHOT... --prior OLD...\n");
      return kExitError;
    }
    if (!read_state(o.state, family, flavor, o.max_input_size, &prior, &error)) {
      print_error(error);
      return kExitError;
    }
    InputError err;
    if (!partial_file.load(o.partial, o.max_input_size, &err) || !full_file.load(o.full, o.max_input_size, &err)) {
      print_input_error(err);
      return kExitError;
    }
  }
  if (!choose_local_addresses(o.local_addresses, local, family, "verify", &local)) return kExitError;
  verifier::ipset::Table sets;
  if (!o.ipsets.empty() && !read_ipsets(o.ipsets, o.max_input_size, &sets)) return kExitError;
  verifier::VerifyOptions vo;
  vo.local_addresses = local;
  if (!o.ipsets.empty()) vo.ipsets = &sets;
  auto r = verifier::verify(std::move(prior), o.next.empty() ? partial_file.view() : partial,
                            o.next.empty() ? full_file.view() : full, flavor, vo);
  std::string report = o.format == "json"       ? verifier::format_json(r)
                       : o.format == "markdown" ? verifier::format_markdown(r)
                       : o.verbose              ? verifier::format_text(r, true)
                                                : reviewer_text(verifier::format_text(r));
  if (o.format == "json")
    print_json_text(report);
  else
    std::fputs(report.c_str(), stdout);
  if (r.verdict == verifier::Verdict::FailsToApply && r.failing_program == "full") return kExitError;
  if (r.behaviour && !r.behaviour->self_check_failures.empty()) return kExitInternal;
  if (r.verdict == verifier::Verdict::Identical) return kExitOk;
  if (r.verdict == verifier::Verdict::Equivalent && o.allow_equivalent) return kExitOk;
  return kExitDifferent;
}

}  // namespace

void add_verify(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Check that a partial restore applied to the prior state equals the full restore "
                "(exit 0 identical, 1 differs or fails, 2 error)");
  cmd->add_option("snapshot", opts->next, "with --prior: the new snapshot (kpc compiles all three programs)");
  auto* prior = cmd->add_option("--prior", opts->prior, "the snapshot last synced");
  // The two forms exclude each other: programs given, or snapshots compiled.
  cmd->add_option("--state", opts->state, "the prior state: an iptables-save dump or a restore program")
      ->excludes(prior);
  cmd->add_option("--partial", opts->partial, "the partial restore program")->excludes(prior);
  cmd->add_option("--full", opts->full, "the full restore program")->excludes(prior);
  cmd->add_option("--backend", opts->backend,
                  "iptables, ip6tables or nftables (default: told from the files' content or the snapshot's mode; "
                  "fastpath and ipvs are refused with what to use instead)")
      ->check(CLI::IsMember({"iptables", "ip6tables", "nftables", "fastpath", "ipvs"}))
      ->capture_default_str();
  add_flavor_option(cmd, opts->flavor, "legacy or nft restore semantics");
  cmd->add_option("--format", opts->format, "text, json or markdown (a PR-comment-sized report)")
      ->check(CLI::IsMember({"text", "json", "markdown"}))
      ->capture_default_str();
  add_ipsets_option(cmd, opts->ipsets);
  cmd->add_flag("-v,--verbose", opts->verbose, "also the comparison's own words (destination atoms, start classes, leaves), each packet class's description and rule paths, at full width (default: a reviewer's text, lines of at most 100 columns)");
  cmd->add_flag("--allow-equivalent", opts->allow_equivalent,
                "exit 0 when the states differ but no packet is treated differently");
  cmd->add_option("--local-address", opts->local_addresses,
                  "the node's addresses for the packet-level check (default: the snapshot's node addresses, "
                  "else one address no rule names)");
  add_max_input_size_option(cmd, opts->max_input_size);
  // --node picks the node of snapshots: with programs given there is nothing to pick (an error,
  // not a silently ignored flag).
  add_node_option(cmd, opts->node, " (snapshots only: NEW and --prior)")->needs(prior);
  cmd->footer(
      "Examples:\n"
      "  kpc verify new/ --prior old/                                   kpc compiles prior, partial and full\n"
      "  kpc verify --state node.save --partial p.restore --full f.restore\n"
      "  kpc verify --state ruleset.nft --partial p.nft --full f.nft   nftables: transactions, `nft list ruleset`\n"
      "Exit codes: 0 identical (or equivalent with --allow-equivalent), 1 equivalent / not equivalent / cannot\n"
      "prove / the partial fails to apply, 2 error, 3 internal error (a self-check failed).");
  cmd->callback([cmd, opts, &exit_code] {
    if (opts->verbose && opts->format != "text") throw_verbose_needs_text();
    opts->backend_given = cmd->count("--backend") > 0;
    opts->flavor_given = cmd->count("--flavor") > 0;
    exit_code = run(*opts);
  });
}

}  // namespace kpc::cli
