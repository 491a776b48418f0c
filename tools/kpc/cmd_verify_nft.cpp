// `kpc verify` and `kpc diff` on nftables input (verify_nft.h): the nft transaction model
// (verifier/nft) builds the states, verifier/nft_sym compares them by behaviour.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <memory>
#include <thread>

#include "compiler/driver/compile_nftables.h"
#include "compiler/driver/input_kind.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/json_report.h"
#include "tools/kpc/text_layout.h"
#include "tools/kpc/verify_nft.h"
#include "verifier/nft_sym/compare.h"
#include "verifier/nft_sym/verify.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/sem/report.h"

namespace kpc::cli {
namespace {

namespace vn = verifier::nft;
namespace ns = verifier::nft_sym;

void print_nft_error(const vn::NftError& e) {
  std::string rendered = e.render();
  while (!rendered.empty() && rendered.back() == '\n') rendered.pop_back();
  print_tool_error(rendered, e.file, e.line, e.col_begin, e.message);
}

// The three transactions from snapshots (every family the node has an address of): prior =
// full(OLD) on an empty node; partial = the sync from OLD to NEW; full = a forced full sync.
bool compile_three(const NftVerifyRequest& o, std::string* prior, std::string* partial, std::string* full,
                   std::vector<IPAddr>* local) {
  SourceManager sm;
  DiagSink diags;
  Snapshot next_snap, prior_snap;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  lo.node_name = o.node;
  bool ok = load_snapshot(o.next, lo, sm, &next_snap, diags);
  ok = load_snapshot(o.prior, lo, sm, &prior_snap, diags) && ok;
  size_t families = 0;
  for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
    if (!ok) break;
    DiagSink quiet;
    if (!nft_node_context(next_snap, f, quiet) || !nft_node_context(prior_snap, f, quiet)) continue;
    ++families;
    auto a = compile_nftables(prior_snap, f, {}, diags);
    auto b = compile_nftables_from_prior(next_snap, prior_snap, f, {}, diags);
    NftPriorOptions full_sync;
    full_sync.force_full = true;
    auto c = compile_nftables_from_prior(next_snap, prior_snap, f, full_sync, diags);
    if (!a || !b || !c) {
      ok = false;
      break;
    }
    for (auto [to, r] : {std::make_pair(prior, &*a), std::make_pair(partial, &*b), std::make_pair(full, &*c)}) {
      if (!r->cleanup_text.empty()) *to += r->cleanup_text + "\n";
      *to += r->text;
      if (!to->empty() && to->back() != '\n') *to += "\n";
    }
    append_node_addresses(next_snap, f, local);
  }
  if (ok && families == 0) {
    // Let the compiler say why (no address of either family).
    compile_nftables(next_snap, IPFamily::V4, {}, diags);
    ok = false;
  }
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  return ok;
}

// A snapshot (file, directory or stream) as the nftables transaction a full sync writes on a
// fresh node, for every family its Node has an address of; the Node's addresses appended.
bool compile_nft_snapshot(const std::string& path, uint64_t limit, const std::string& node, std::string* program,
                          std::vector<IPAddr>* node_addresses) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  LoadOptions lo;
  lo.max_input_size = limit;
  lo.node_name = node;
  bool ok = load_snapshot({path}, lo, sm, &snap, diags);
  size_t families = 0;
  for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
    if (!ok) break;
    DiagSink quiet;
    if (!nft_node_context(snap, f, quiet)) continue;
    ++families;
    auto c = compile_nftables(snap, f, {}, diags);
    if (!c) {
      ok = false;
      break;
    }
    *program += c->text;
    if (!program->empty() && program->back() != '\n') *program += "\n";
    append_node_addresses(snap, f, node_addresses);
  }
  if (ok && families == 0) {
    compile_nftables(snap, IPFamily::V4, {}, diags);  // let the compiler say why
    ok = false;
  }
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  return ok;
}

bool locals(const std::vector<std::string>& given, std::vector<IPAddr> derived, const char* cmd,
            std::vector<IPAddr>* out) {
  // Both families' addresses: the comparison picks each family's own.
  std::vector<IPAddr> v4, v6;
  for (const auto& a : derived) (a.family == IPFamily::V4 ? v4 : v6).push_back(a);
  std::vector<std::string> g4, g6;
  for (const auto& s : given) {
    auto a = IPAddr::parse(s);
    (a && a->family == IPFamily::V6 ? g6 : g4).push_back(s);
  }
  std::vector<IPAddr> o4, o6;
  if (!choose_local_addresses(g4, v4, IPFamily::V4, cmd, &o4)) return false;
  if (!choose_local_addresses(g6, v6, IPFamily::V6, cmd, &o6)) return false;
  out->clear();
  out->insert(out->end(), o4.begin(), o4.end());
  out->insert(out->end(), o6.begin(), o6.end());
  return true;
}

}  // namespace

int run_verify_nft(const NftVerifyRequest& o) {
  vn::NftState prior;
  std::string partial, full;
  std::vector<IPAddr> local;
  std::string partial_name = o.partial, full_name = o.full;
  if (!o.next.empty()) {
    std::string prior_program;
    if (!compile_three(o, &prior_program, &partial, &full, &local)) return kExitError;
    auto r = vn::apply_script(prior, prior_program, "prior.nft");
    if (!r.ok) {
      std::fprintf(stderr, "internal error: the prior's full transaction fails: %s\n", r.error->to_string().c_str());
      return kExitInternal;
    }
    partial_name = "partial.nft";
    full_name = "full.nft";
  }
  ns::NftVerifyResult r;
  ns::NftVerifyOptions vo;
  if (o.next.empty()) {
    if (o.state.empty() || o.partial.empty() || o.full.empty()) {
      std::fprintf(stderr, "kpc verify: give --state, --partial and --full, or SNAPSHOT... --prior OLD...\n");
      return kExitError;
    }
    // The three files mapped (no copies); the prior read while the transactions are parsed
    // (ns::verify_nft_texts). Messages in the order of the files: the prior's, then the others'.
    InputText prior_in, partial_in, full_in;
    InputError prior_err, partial_err, full_err;
    bool prior_loaded = prior_in.load(o.state, o.max_input_size, &prior_err);
    bool partial_loaded = partial_in.load(o.partial, o.max_input_size, &partial_err);
    bool full_loaded = full_in.load(o.full, o.max_input_size, &full_err);
    if (!prior_loaded) print_input_error(prior_err);
    if (!partial_loaded || !full_loaded) {
      if (prior_loaded) {
        vn::NftError e;
        if (!ns::read_nft_state(prior_in.view(), o.state, &prior, &e)) print_nft_error(e);
      }
      if (!partial_loaded) print_input_error(partial_err);
      if (!full_loaded) print_input_error(full_err);
      return kExitError;
    }
    if (!prior_loaded) return kExitError;
    bool addresses_ok = std::all_of(o.local_addresses.begin(), o.local_addresses.end(),
                                    [](const std::string& a) { return IPAddr::parse(a).has_value(); });
    if (!addresses_ok) {
      // As before: the prior's error first, else the address's.
      vn::NftError e;
      if (!ns::read_nft_state(prior_in.view(), o.state, &prior, &e)) print_nft_error(e);
      else locals(o.local_addresses, local, "verify", &local);
      return kExitError;
    }
    if (!locals(o.local_addresses, local, "verify", &local)) return kExitError;
    vo.local_addresses = local;
    vo.keep_until_exit = true;  // a one-shot command: the process's end frees the states
    vn::NftError e;
    if (!ns::verify_nft_texts(prior_in.view(), o.state, partial_in.view(), full_in.view(), vo, partial_name,
                              full_name, &r, &e)) {
      print_nft_error(e);
      return kExitError;
    }
  } else {
    if (!locals(o.local_addresses, local, "verify", &local)) return kExitError;
    vo.local_addresses = local;
    vo.keep_until_exit = true;
    r = ns::verify_nft(std::move(prior), partial, full, vo, partial_name, full_name);
  }
  std::string report = o.format == "json"       ? ns::format_json(r)
                       : o.format == "markdown" ? ns::format_markdown(r)
                       : o.verbose              ? ns::format_text(r, true)
                                                : reviewer_text(ns::format_text(r));
  if (o.format == "json")
    print_json_text(report);
  else
    std::fputs(report.c_str(), stdout);
  if (r.verdict == verifier::Verdict::FailsToApply && r.failing_program == "full") return kExitError;
  // (kpc cannot say what nft does with the partial: no verdict on it)
  if (r.failure && r.failure->not_modelled) return kExitError;
  if (r.behaviour && !r.behaviour->self_check_failures.empty()) return kExitInternal;
  if (r.verdict == verifier::Verdict::Identical) return kExitOk;
  if (r.verdict == verifier::Verdict::Equivalent && o.allow_equivalent) return kExitOk;
  return kExitDifferent;
}

int run_diff_nft(const NftDiffRequest& o) {
  // Both sides read on two threads (two independent states); messages in the files' order.
  // The two states are kept until the process ends (a static holds them): freeing two
  // 10,000-Service states, ~1.4 GB of small objects, took ~1 s after the report was out.
  static std::vector<std::unique_ptr<vn::NftState>>* kept = new std::vector<std::unique_ptr<vn::NftState>>;
  kept->push_back(std::make_unique<vn::NftState>());
  kept->push_back(std::make_unique<vn::NftState>());
  vn::NftState& before = *(*kept)[kept->size() - 2];
  vn::NftState& after = *(*kept)[kept->size() - 1];
  InputText before_in, after_in;
  InputError before_load, after_load;
  // A side that is a snapshot is compiled first (nftables, every family its Node runs).
  std::string compiled[2];
  std::vector<IPAddr> derived;
  bool compiled_side[2] = {false, false};
  for (int k = 0; k < 2; ++k) {
    InputEvidence ev;
    InputError ie;
    const std::string& path = k ? o.after : o.before;
    if (classify_input(path, o.max_input_size, &ev, &ie) && ev.kind == InputKind::Snapshot) {
      if (!compile_nft_snapshot(path, o.max_input_size, o.node, &compiled[k], &derived)) return kExitError;
      compiled_side[k] = true;
    }
  }
  bool before_loaded = compiled_side[0] || before_in.load(o.before, o.max_input_size, &before_load);
  bool after_loaded = compiled_side[1] || after_in.load(o.after, o.max_input_size, &after_load);
  std::string_view before_text = compiled_side[0] ? std::string_view(compiled[0]) : before_in.view();
  std::string_view after_text = compiled_side[1] ? std::string_view(compiled[1]) : after_in.view();
  vn::NftError before_err, after_err;
  bool before_ok = false, after_ok = false;
  {
    std::exception_ptr side_error;
    std::thread side([&] {
      try {
        if (after_loaded) after_ok = ns::read_nft_state(after_text, o.after, &after, &after_err);
      } catch (...) {
        side_error = std::current_exception();
      }
    });
    try {
      if (before_loaded) before_ok = ns::read_nft_state(before_text, o.before, &before, &before_err);
    } catch (...) {
      side.join();
      throw;
    }
    side.join();
    if (side_error) std::rethrow_exception(side_error);
  }
  if (!before_loaded) print_input_error(before_load);
  else if (!before_ok) print_nft_error(before_err);
  if (!after_loaded) print_input_error(after_load);
  else if (!after_ok) print_nft_error(after_err);
  if (!before_ok || !after_ok) return kExitError;
  std::vector<std::string> why;
  if (derived.empty())  // no snapshot side: the addresses the rules name
    for (const auto* st : {&before, &after})
      for (IPFamily f : {IPFamily::V4, IPFamily::V6})
        for (const auto& a : verifier::nft_trace::infer_local_addresses(*st, f, &why)) derived.push_back(a);
  std::vector<IPAddr> local;
  if (!locals(o.local_addresses, derived, "diff", &local)) return kExitError;
  verifier::sem::CompareOptions co;
  co.local_addresses = local;
  co.explore_all = o.explore_all;
  co.max_reported = o.max_classes ? o.max_classes : SIZE_MAX;
  auto r = ns::compare_nft(before, after, co);
  verifier::sem::ReportOptions ro;
  ro.before_name = "old";
  ro.after_name = "new";
  ro.verbose = o.verbose;
  std::string report = o.format == "json"       ? verifier::sem::diff_json(r, ro)
                       : o.format == "markdown" ? "### kpc diff `" + o.before + "` → `" + o.after + "` (nftables)\n\n" +
                                                      verifier::sem::diff_markdown(r, ro)
                                                : verifier::sem::diff_text(r, ro);
  if (o.format == "text") {
    std::string head = "kpc diff " + o.before + " -> " + o.after + " (nftables, local addresses:";
    for (const auto& a : local) head += " " + a.str();
    head += ")\n";
    report = o.verbose ? head + report : reviewer_text(head + report);
  }
  if (o.format == "json")
    print_json_text(report);
  else
    std::fputs(report.c_str(), stdout);
  if (!r.self_check_failures.empty()) return kExitInternal;
  return r.equivalent() ? kExitOk : kExitDifferent;
}

}  // namespace kpc::cli
