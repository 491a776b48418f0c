// `kpc diff` across back ends (diff_cross.h): each side is loaded by its own mode's model
// (iptables: the restore state machine; nftables: the nft transaction model), or compiled
// from a snapshot with the driver first, then handed to verifier/cross as a concrete front end.
// iptables and nftables programs are compared by packet class (cross/by_class.h: both symbolic
// front ends, every class); a side in IPVS mode by representative packets (cross/compare.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>

#include "compiler/driver/compile.h"
#include "compiler/driver/input_kind.h"
#include "compiler/model/loader.h"
#include "compiler/support/keep_until_exit.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/diff_cross.h"
#include "tools/kpc/json_report.h"
#include "tools/kpc/text_layout.h"
#include "tools/kpc/trace_ipvs.h"
#include "tools/kpc/trace_nft.h"
#include "verifier/cross/by_class.h"
#include "verifier/cross/compare.h"
#include "verifier/cross/report.h"
#include "verifier/ipvs_trace/cross_frontend.h"
#include "verifier/ipvs_trace/tracer.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/trace/tracer.h"

namespace kpc::cli {
namespace {

namespace cross = verifier::cross;

// One side, loaded: its state lives here for the front end's lifetime.
struct Side {
  std::string name, backend;
  verifier::RulesetState ipt;
  verifier::nft::NftState nft;
  std::unique_ptr<verifier::ipvs_trace::ProgramSet> ipvs;  ///< backend "ipvs" (trace_ipvs.h)
  std::vector<IPAddr> node_addresses;
};

bool load_nft_text(std::string_view text, const std::string& name, Side* s) {
  verifier::nft::NftError err;
  if (verifier::nft::looks_like_listing(text)) {
    if (!verifier::nft::parse_listing(text, name, &s->nft, &err)) {
      print_error(err.render());
      return false;
    }
    return true;
  }
  // Parsed on two threads: the other side's loading is usually done first (docs/performance.md).
  auto res = verifier::nft::apply_prepared(
      s->nft, verifier::nft::prepare_script(text, verifier::nft::ParseThreads::Two), text, name);
  if (!res.ok) {
    for (const auto& e : res.errors) print_error(e.render());
    if (res.errors.empty() && res.error) print_error(res.error->render());
    return false;
  }
  return true;
}

// A snapshot compiled with the nftables back end (a full sync on a fresh node).
bool compile_nft(const std::string& path, const CrossDiffRequest& r, IPFamily family, Side* s,
                 std::string_view text = {}) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  LoadOptions lo;
  lo.max_input_size = r.max_input_size;
  lo.node_name = r.node;
  std::error_code ec;
  bool ok;
  if (std::filesystem::is_directory(path, ec)) {
    ok = load_snapshot({path}, lo, sm, &snap, diags);
  } else {
    ok = load_snapshot_text({{path, std::string(text)}}, lo, sm, &snap, diags);
  }
  std::optional<std::string> program;
  if (ok) program = compile_program(snap, Target{BackendKind::NFTables, family}, "1.35", diags);
  if (program) append_node_addresses(snap, family, &s->node_addresses);
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (!program) return false;
  auto res = verifier::nft::apply_prepared(
      s->nft, verifier::nft::prepare_script(*program, verifier::nft::ParseThreads::Two), *program, "compiled.nft");
  if (!res.ok) {
    print_error("kpc diff: internal error: the compiled nftables transaction fails");
    return false;
  }
  return true;
}

bool load_side(const std::string& path, const std::string& forced, const std::string& dflt, const CrossDiffRequest& r,
               IPFamily family, Side* s) {
  s->name = path;
  // What the input is, from its content (a stream is read once and replayed: input_kind.h).
  InputEvidence ev;
  InputError ie;
  if (!classify_input(path, r.max_input_size, &ev, &ie)) {
    print_input_error(ie);
    return false;
  }
  bool nft_file = ev.kind == InputKind::NftRules;
  std::optional<BackendKind> content = ev.mode();
  if (!forced.empty() && content && forced != backend_kind_name(*content)) {
    print_error("kpc diff: " + ev.where() + " is " + input_kind_phrase(ev.kind) + ", but --" +
                (&forced == &r.from_backend ? "from" : "to") + "-backend " + forced +
                " asked for this side; drop the flag (the content decides) or pass a " + forced + " program");
    return false;
  }
  s->backend = !forced.empty() ? forced : content ? backend_kind_name(*content) : dflt;
  if (s->backend == "ipvs") {
    // An IPVS program set (the directory kpc compile --backend ipvs -o wrote) or a snapshot.
    s->ipvs = std::make_unique<verifier::ipvs_trace::ProgramSet>();
    std::vector<std::string> notes;
    if (!load_ipvs_program_set({path, r.max_input_size, r.node}, family, s->ipvs.get(), &s->node_addresses, &notes))
      return false;
    for (const auto& a : verifier::ipvs_trace::inferred_node_addresses(*s->ipvs)) s->node_addresses.push_back(a);
    return true;
  }
  if (s->backend == "nftables") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return compile_nft(path, r, family, s);
    // A file or a pipe: read once, then told apart by its content.
    InputText in;
    InputError ie;
    if (!in.load(path, r.max_input_size, &ie)) {
      print_input_error(ie);
      return false;
    }
    if (looks_like_nft(in.view())) return load_nft_text(in.view(), path, s);
    if (looks_like_rules(in.view())) {
      print_error("kpc diff: " + path + ": an iptables rule file, but --backend nftables asked for this side");
      return false;
    }
    return compile_nft(path, r, family, s, in.view());
  }
  if (nft_file) {
    print_error("kpc diff: " + path + ": an nft file, but --backend iptables asked for this side");
    return false;
  }
  RuleInput in;
  if (!open_rule_input(path, r.max_input_size, &in)) return false;
  RuleInputOptions o;
  o.backend = family == IPFamily::V4 ? Backend::IPTables : Backend::IP6Tables;
  o.backend_given = true;
  o.flavor = r.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  o.max_input_size = r.max_input_size;
  o.node = r.node;
  if (!read_rule_input(in, o, &s->ipt, &s->node_addresses)) return false;
  bool add = r.jumps == "yes" || (r.jumps == "auto" && verifier::trace::builtin_chains_empty(s->ipt));
  std::string err;
  if (add && !verifier::trace::add_kube_proxy_jumps(s->ipt, &err)) {
    print_error("kpc diff: cannot add kube-proxy's jumps: " + err);
    return false;
  }
  return true;
}

}  // namespace

namespace {

// The families to compare: --backend ip6tables names IPv6; a snapshot side, every family its
// Node has an address of (as kube-proxy runs one proxier per family); program files, IPv4.
std::vector<IPFamily> families_to_compare(const CrossDiffRequest& r) {
  if (r.v6) return {IPFamily::V6};
  for (const std::string* path : {&r.a, &r.b}) {
    if (path->empty()) continue;
    InputEvidence ev;
    InputError ie;
    if (!classify_input(*path, r.max_input_size, &ev, &ie) || ev.kind != InputKind::Snapshot) continue;
    SourceManager sm;
    DiagSink quiet;
    Snapshot snap;
    LoadOptions lo;
    lo.max_input_size = r.max_input_size;
    lo.node_name = r.node;
    if (!load_snapshot({*path}, lo, sm, &snap, quiet)) continue;  // the side's own load reports why
    std::vector<IPFamily> out;
    for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
      std::vector<IPAddr> addrs;
      append_node_addresses(snap, f, &addrs);
      if (!addrs.empty()) out.push_back(f);
    }
    if (!out.empty()) return out;
  }
  return {IPFamily::V4};
}

struct FamilyReport {
  int exit = kExitOk;
  std::string text;             ///< text or markdown
  nlohmann::ordered_json json;  ///< --format json: the family's fields
};

FamilyReport diff_family(const CrossDiffRequest& r, IPFamily family) {
  FamilyReport out;
  // What the diff builds (at 10,000 Services two states, two tracers' rule models and ~100,000
  // differing cells: ~2 GB of small objects) is kept until the process ends: freeing it took
  // ~0.6 s after the report was out (kpc::keep_until_exit: not a leak).
  struct Held {
    Side a, b;
    std::unique_ptr<cross::ConcreteFrontend> fa, fb;
    cross::CrossResult result;
  };
  Held& held = keep_until_exit(Held{});
  Side& a = held.a;
  Side& b = held.b;
  const std::string& b_path = r.b.empty() ? r.a : r.b;
  // The two sides load on two threads (each reads, compiles if it is a snapshot, and builds its
  // mode's state: at 10,000 Services ~1 s for iptables, ~3 s for nft), B's reports held and
  // printed after A's, as one thread would print them. Standard input is read by one side only,
  // so a side on "-" loads them in sequence.
  bool ok_a = false, ok_b = false;
  std::vector<DeferredReports::Item> b_reports;
  if (r.a != "-" && b_path != "-") {
    auto other = std::async(std::launch::async, [&] {
      DeferredReports held;
      bool ok = load_side(b_path, r.to_backend, "nftables", r, family, &b);
      b_reports = std::move(held.items);
      return ok;
    });
    ok_a = load_side(r.a, r.from_backend, "iptables", r, family, &a);
    ok_b = other.get();
    // One snapshot compiled twice: its errors are reported once (B's reports only when A loaded).
    if (r.b.empty() && !ok_a) ok_b = false;
    else DeferredReports::replay(std::move(b_reports));
  } else {
    ok_a = load_side(r.a, r.from_backend, "iptables", r, family, &a);
    ok_b = (r.b.empty() && !ok_a) ? false : load_side(b_path, r.to_backend, "nftables", r, family, &b);
  }
  if (!ok_a || !ok_b) return {kExitError, {}, {}};

  std::vector<IPAddr> derived = a.node_addresses;
  derived.insert(derived.end(), b.node_addresses.begin(), b.node_addresses.end());
  if (derived.empty() && r.local_addresses.empty()) {
    for (const Side* s : {&a, &b}) {
      std::vector<std::string> why;
      auto got = s->backend == "nftables" ? verifier::nft_trace::infer_local_addresses(s->nft, family, &why)
                                          : local_addresses_of(s->ipt, &why);
      derived.insert(derived.end(), got.begin(), got.end());
    }
  }
  std::vector<IPAddr> local;
  std::vector<std::string> given;  // --local-address values of this family (the others are the other's)
  for (const auto& g : r.local_addresses) {
    auto ga = IPAddr::parse(g);
    if (!ga || ga->family == family || r.v6) given.push_back(g);
  }
  if (!choose_local_addresses(given, derived, family, "diff", &local)) return {kExitError, {}, {}};

  auto make = [&](const Side& s) {
    if (s.backend == "ipvs") return verifier::ipvs_trace::make_ipvs_frontend(*s.ipvs, local);
    return s.backend == "nftables" ? cross::make_nft_frontend(s.nft, family, local, r.kernel_numgen)
                                   : cross::make_iptables_frontend(s.ipt, local);
  };
  // Each front end reads its own side's state (the iptables one scans every rule): two threads.
  auto fb_later = std::async(std::launch::async, [&] { return make(b); });
  held.fa = make(a);
  held.fb = fb_later.get();
  // The engine: per class where both modes have a symbolic front end, unless --cross-engine says
  // otherwise or (auto) a side is too large for it; the report says which and why.
  auto rules_of = [](const Side& s) {
    size_t n = 0;
    if (s.backend == "nftables") {
      for (const auto& t : s.nft.tables)
        for (const auto& c : t.chains) n += c.rules.size();
    } else {
      for (const auto& t : s.ipt.tables) n += t.rule_count();
    }
    return n;
  };
  const bool symbolic_both = a.backend != "ipvs" && b.backend != "ipvs";
  std::string engine_note;
  bool per_class = symbolic_both && r.engine != "sample";
  if (per_class && r.engine == "auto") {
    size_t most = std::max(rules_of(a), rules_of(b));
    if (most > kAutoPerClassRules) {
      per_class = false;
      engine_note = "by sample: a side has " + std::to_string(most) + " rules (more than " +
                    std::to_string(kAutoPerClassRules) + "), where the per-class comparison takes minutes and GBs; "
                    "--cross-engine per-class forces it";
    }
  } else if (symbolic_both && r.engine == "sample") {
    engine_note = "by sample, as --cross-engine sample asks";
  }
  if (per_class) {
    // Both modes have a symbolic front end: every packet class, each difference classified.
    auto side = [](const Side& s, const cross::ConcreteFrontend* f) {
      cross::ClassSide c;
      if (s.backend == "nftables") c.nft = &s.nft;
      else c.iptables = &s.ipt;
      c.concrete = f;
      return c;
    };
    cross::ByClassOptions bo;
    bo.local_addresses = local;
    held.result = cross::compare_by_class(side(a, held.fa.get()), side(b, held.fb.get()), family, bo);
  } else {
    // IPVS has no symbolic front end: representative packets through both programs.
    cross::PacketSpace space = cross::build_space(*held.fa, *held.fb, family, local);
    held.result = cross::compare(*held.fa, *held.fb, space);
  }
  const cross::CrossResult& res = held.result;

  cross::ReportOptions ro;
  ro.name_a = r.a;
  ro.name_b = r.b.empty() ? r.a : r.b;
  ro.show_known = r.show_known;
  ro.verbose = r.verbose;
  if (r.format == "json") {
    out.json = cross::cross_json(res, ro);
    out.json["numgen"] = r.kernel_numgen ? "kernel" : "nominal";
    nlohmann::ordered_json la = nlohmann::ordered_json::array();
    for (const auto& x : local) la.push_back(x.str());
    out.json["local_addresses"] = la;
    out.json["engine_note"] = engine_note.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(engine_note);
  } else if (r.format == "markdown") {
    out.text = cross::cross_markdown(res, ro);
    if (!engine_note.empty()) out.text.insert(out.text.find("\n\n") + 2, "Coverage: " + engine_note + ".\n\n");
  } else {
    std::string text = cross::cross_text(res, ro);
    std::string locals = "local addresses:";
    for (const auto& x : local) locals += " " + x.str();
    locals += r.kernel_numgen ? "; numgen shares: the kernel's split\n" : "; numgen shares: nominal 1/N\n";
    text.insert(text.find('\n') + 1, locals);
    if (!engine_note.empty()) {  // right after the coverage line
      size_t cov = text.find("coverage: ");
      if (cov != std::string::npos) text.insert(text.find('\n', cov) + 1, "  (" + engine_note + ")\n");
    }
    out.text = r.verbose ? text : reviewer_text(text);
  }
  out.exit = !res.self_check_failures.empty() ? kExitInternal : res.only_known() ? kExitOk : kExitDifferent;
  return out;
}

}  // namespace

int run_diff_cross(const CrossDiffRequest& r) {
  if (r.b.empty() && (r.from_backend.empty() || r.to_backend.empty())) {
    print_error("kpc diff: one input: give --from-backend and --to-backend (it is compiled with both)");
    return kExitError;
  }
  // Every family the node runs, each compared and reported on its own (kube-proxy runs one
  // proxier per family); the exit status is the worst of them.
  std::vector<FamilyReport> reports;
  int exit = kExitOk;
  for (IPFamily f : families_to_compare(r)) {
    reports.push_back(diff_family(r, f));
    if (reports.back().exit == kExitError) return kExitError;
    exit = std::max(exit, reports.back().exit);
  }
  if (r.format == "json") {
    // The first family's fields at the top (one family: the document as it always was); each
    // further family's in other_families; only_known is over every family.
    auto doc = json_document("diff-cross");
    for (auto& [k, v] : reports[0].json.items()) doc[k] = v;
    nlohmann::ordered_json others = nlohmann::ordered_json::array();
    for (size_t i = 1; i < reports.size(); ++i) others.push_back(std::move(reports[i].json));
    doc["other_families"] = std::move(others);
    doc["only_known"] = exit == kExitOk;
    print_json(std::move(doc));
  } else {
    for (size_t i = 0; i < reports.size(); ++i) {
      if (i) std::fputs("\n", stdout);
      std::fputs(reports[i].text.c_str(), stdout);
    }
  }
  return exit;
}

}  // namespace kpc::cli
