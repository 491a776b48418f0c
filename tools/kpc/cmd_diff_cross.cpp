// `kpc diff` across back ends (diff_cross.h): each side is loaded by its own mode's model
// (iptables: the restore state machine; nftables: the nft transaction model), or compiled
// from a snapshot with the driver first, then handed to verifier/cross as a concrete front end.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>

#include "compiler/driver/compile.h"
#include "compiler/model/loader.h"
#include "compiler/support/keep_until_exit.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/diff_cross.h"
#include "tools/kpc/json_report.h"
#include "tools/kpc/text_layout.h"
#include "tools/kpc/trace_ipvs.h"
#include "tools/kpc/trace_nft.h"
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

// The first bytes of a regular file (enough to tell an nft file from the rest). Never reads a
// pipe or stdin: that would consume the side (a piped nft side needs --from/--to-backend).
std::string head_of(const std::string& path) {
  std::error_code ec;
  if (path == "-" || !std::filesystem::is_regular_file(path, ec)) return "";
  std::ifstream f(path, std::ios::binary);
  std::string s(8192, '\0');
  f.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(f.gcount()));
  return s;
}

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
  std::string head = head_of(path);
  bool nft_file = !head.empty() && looks_like_nft(head), ipt_file = !head.empty() && looks_like_rules(head);
  s->backend = !forced.empty() ? forced : nft_file ? "nftables" : ipt_file ? "iptables" : dflt;
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

bool wants_cross_diff(const CrossDiffRequest& r) {
  if (!r.from_backend.empty() || !r.to_backend.empty() || r.b.empty()) return true;
  // Two files of one mode are a same-mode diff (iptables, or nft: verifier/nft_sym).
  return looks_like_nft(head_of(r.a)) != looks_like_nft(head_of(r.b));
}

int run_diff_cross(const CrossDiffRequest& r) {
  const IPFamily family = r.v6 ? IPFamily::V6 : IPFamily::V4;
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
  if (r.b.empty() && (r.from_backend.empty() || r.to_backend.empty())) {
    print_error("kpc diff: one input: give --from-backend and --to-backend (it is compiled with both)");
    return kExitError;
  }
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
  if (!ok_a || !ok_b) return kExitError;

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
  if (!choose_local_addresses(r.local_addresses, derived, family, "diff", &local)) return kExitError;

  auto make = [&](const Side& s) {
    if (s.backend == "ipvs") return verifier::ipvs_trace::make_ipvs_frontend(*s.ipvs, local);
    return s.backend == "nftables" ? cross::make_nft_frontend(s.nft, family, local, r.kernel_numgen)
                                   : cross::make_iptables_frontend(s.ipt, local);
  };
  // Each front end reads its own side's state (the iptables one scans every rule): two threads.
  auto fb_later = std::async(std::launch::async, [&] { return make(b); });
  held.fa = make(a);
  held.fb = fb_later.get();
  cross::PacketSpace space = cross::build_space(*held.fa, *held.fb, family, local);
  held.result = cross::compare(*held.fa, *held.fb, space);
  const cross::CrossResult& res = held.result;

  cross::ReportOptions ro;
  ro.name_a = r.a;
  ro.name_b = r.b.empty() ? r.a : r.b;
  ro.show_known = r.show_known;
  ro.verbose = r.verbose;
  if (r.format == "json") {
    auto doc = json_document("diff-cross");
    nlohmann::ordered_json body = cross::cross_json(res, ro);  // kept alive while its items are read
    for (auto& [k, v] : body.items()) doc[k] = v;
    doc["numgen"] = r.kernel_numgen ? "kernel" : "nominal";
    nlohmann::ordered_json la = nlohmann::ordered_json::array();
    for (const auto& x : local) la.push_back(x.str());
    doc["local_addresses"] = la;
    print_json(std::move(doc));
  } else if (r.format == "markdown") {
    std::fputs(cross::cross_markdown(res, ro).c_str(), stdout);
  } else {
    std::string text = cross::cross_text(res, ro);
    std::string locals = "local addresses:";
    for (const auto& x : local) locals += " " + x.str();
    locals += r.kernel_numgen ? "; numgen shares: the kernel's split\n" : "; numgen shares: nominal 1/N\n";
    text.insert(text.find('\n') + 1, locals);
    std::fputs(r.verbose ? text.c_str() : reviewer_text(text).c_str(), stdout);
  }
  return res.only_known() ? kExitOk : kExitDifferent;
}

}  // namespace kpc::cli
