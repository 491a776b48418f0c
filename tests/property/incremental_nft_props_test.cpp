// The incremental compiler's nftables path against kube-proxy's own way of syncing, over
// random clusters and random sequences of changes (issue 14 §3): kube-proxy visits every
// service port at every sync; the incremental compiler visits only the Services touched since
// the last sync and takes the rest from its footprints. After every sync the two must give
// byte for byte the same transactions (main and stale-chain cleanup), the same partial flag
// and the same metrics. The reference is nftables::sync_nftables over all ports, told what
// changed by compute_changes on the two snapshots (the batch path's change detection, not the
// incremental compiler's events). The first sync must also equal compile_nftables.
//
// Each step: 1-3 everyday changes, or a host change (a full sync), or none; sometimes a forced
// full sync, a failed transaction (the kernel rolls back, the next sync is full), or two
// seconds passing (stale chains are deleted). IPv4 and IPv6. The count of compared syncs is
// printed at exit; RC_PARAMS="max_success=2000" for a long run.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "applier/node/nft_want.h"
#include "compiler/driver/compile_nftables.h"
#include "compiler/driver/incremental.h"
#include "compiler/proxy/change_tracker.h"
#include "compiler/proxy/service_ports.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/cluster_events.h"
#include "tests/support/snapshot_gen.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"

namespace kpc::test {
namespace {

using testgen::GeneratedCluster;

struct NftCounter {
  int syncs = 0, partial = 0, subset = 0, failures = 0, cleanups = 0, full_programs = 0, parts_read = 0, parts = 0, want_objects = 0;
  ~NftCounter() {
    if (syncs)
      std::fprintf(stderr,
                   "IncrementalNftProps: %d syncs compared with kube-proxy's every-port sync (%d partial, %d after a "
                   "failed transaction, %d with a stale-chain cleanup; %d partial syncs visited only the touched Services; "
                   "%d full_nft_program texts equal to compile_nftables, and in parts; the proof's reference from the parts: "
                   "%d of %d parts read, %d by the object path)\n",
                   syncs, partial, failures, cleanups, subset, full_programs, parts_read, parts, want_objects);
  }
};
NftCounter counter;

// The reference: one proxier's state, synced the way kube-proxy does.
struct Reference {
  IPFamily family;
  nftables::SyncState state;
  bool synced = false, failed = false;
  std::optional<nftables::SyncResult> sync(const Snapshot& next, const Snapshot* prior, bool force_full, int64_t now) {
    DiagSink diags;
    auto node = nft_node_context(next, family, diags);
    if (!node) return std::nullopt;
    auto ports = proxy::build_service_ports(next, *node);
    nftables::SyncOptions o;
    o.full = !synced || force_full || failed;
    if (prior) {
      DiagSink d2;
      auto prior_node = nft_node_context(*prior, family, d2);
      auto prior_ports = proxy::build_service_ports(*prior, *prior_node);
      auto changes = proxy::compute_changes(*prior, prior_ports, *prior_node, next, ports, *node);
      o.full = o.full || changes.full_sync;
      o.changed_services = changes.services;
    }
    o.service_cidrs = service_cidrs_of(next, family);
    o.now_ms = now;
    auto r = nftables::sync_nftables(ports, *node, o, state);
    synced = true;
    failed = false;
    return r;
  }
};

void check_same(const NftCompileResult& inc, const nftables::SyncResult& ref, bool ref_partial, const std::string& what) {
  std::string ref_text = nftables::print_transaction(ref.tx);
  std::string ref_cleanup = nftables::print_transaction(ref.cleanup);
  if (inc.partial != ref_partial) RC_FAIL(what + ": partial flags differ");
  if (inc.cleanup_text != ref_cleanup)
    RC_FAIL(what + ": cleanup transactions differ\n--- incremental\n" + inc.cleanup_text + "--- reference\n" + ref_cleanup);
  if (inc.text != ref_text) {
    RC_FAIL(what + ": transactions " + first_difference(inc.text, ref_text, "incremental", "reference") +
            "\n--- reference transaction\n" + ref_text);
  }
  if (inc.sync.total_endpoints != ref.total_endpoints ||
      inc.sync.no_local_endpoints_internal != ref.no_local_endpoints_internal ||
      inc.sync.no_local_endpoints_external != ref.no_local_endpoints_external)
    RC_FAIL(what + ": metrics differ");
}

// IncrementalCompiler::full_nft_program (the kept fragments assembled) against a full compile
// of the same objects on a fresh node: the reference kpc-applier's nftables proof uses.
// And full_nft_program_parts: the same text in parts, whose unchanged ones the proof's
// reference (applier::NftWant, fed the parts) does not read again: its state must still list
// as the whole text applied to an empty state.
void check_full_program(IncrementalCompiler& ic, const Snapshot& snap, IPFamily family, const std::string& what,
                        applier::NftWant* want = nullptr) {
  auto parts = ic.full_nft_program_parts();
  std::string joined;
  if (parts)
    for (const auto& p : *parts) joined += p.text;
  if (want && parts) {
    std::vector<applier::NftWant::Part> wp;
    for (const auto& p : *parts) wp.push_back({p.id, p.version, p.text});
    auto u = want->update(wp);
    verifier::nft::NftState whole;
    auto w = verifier::nft::apply_script(whole, joined, "full.nft");
    RC_ASSERT(u.ok == w.ok);
    if (u.ok) {
      const std::string a = verifier::nft::print_ruleset(want->state()), b = verifier::nft::print_ruleset(whole);
      if (a != b) RC_FAIL(what + ": the reference from parts " + first_difference(a, b, "kept", "whole apply"));
    }
    counter.parts += static_cast<int>(parts->size());
    counter.parts_read += static_cast<int>(u.parts_read);
    counter.want_objects += u.incremental;
  }
  // (full_nft_program is the parts joined: the comparison below covers both)
  auto assembled = ic.full_nft_program();
  DiagSink d;
  NftOptions no;
  no.keep_state = false;
  auto full = compile_nftables(snap, family, no, d);
  RC_ASSERT(assembled.has_value() == full.has_value());
  if (assembled && *assembled != full->text)
    RC_FAIL(what + ": full_nft_program " + first_difference(*assembled, full->text, "assembled", "compile_nftables"));
  ++counter.full_programs;
}

}  // namespace

RC_GTEST_PROP(IncrementalNftProps, SameTransactionsAsVisitingEveryPort, ()) {
  testgen::GenOptions go;
  go.max_services = 6;
  GeneratedCluster c = make_compilable(*testgen::gen_cluster(go));
  auto prior = load_compilable(c);
  RC_PRE(prior.has_value());

  struct Fam {
    IPFamily family;
    IncrementalCompiler ic;
    Reference ref;
    applier::NftWant want;
    explicit Fam(IPFamily f) : family(f), ic(Target{BackendKind::NFTables, f}), ref{f} {}
  };
  std::vector<std::unique_ptr<Fam>> fams;
  for (IPFamily f : {IPFamily::V4, IPFamily::V6}) fams.push_back(std::make_unique<Fam>(f));
  int64_t now = 0;
  for (auto& f : fams) {
    f->ic.replace_all(*prior);
    DiagSink d1, d2;
    IncrementalSyncOptions io;
    io.now_ms = now;
    auto inc = f->ic.sync_nft(io, d1);
    auto first = compile_nftables(*prior, f->family, {}, d2);
    auto ref = f->ref.sync(*prior, nullptr, false, now);
    RC_ASSERT(inc.has_value() == ref.has_value());
    if (!inc) continue;
    RC_ASSERT(first.has_value());
    RC_ASSERT(inc->text == first->text);
    check_same(*inc, *ref, false, std::string("first sync, ") + family_name(f->family));
    check_full_program(f->ic, *prior, f->family, "first sync", &f->want);
    ++counter.syncs;
  }

  Documents docs = documents(c);
  int serial = 0;
  const int steps = *rc::gen::inRange(1, 9);
  for (int step = 0; step < steps; ++step) {
    GeneratedCluster next_c = c;
    const int kind = *rc::gen::inRange(0, 10);
    if (kind == 0) {
      // no change at all
    } else if (kind == 1) {
      change_host(next_c, ++serial);
    } else {
      for (int m = *rc::gen::inRange(1, 4); m > 0; --m) mutate_cluster(next_c, ++serial);
    }
    auto next = load_compilable(next_c);
    if (!next) continue;
    Documents next_docs = documents(make_compilable(next_c));
    const bool force_full = *rc::gen::inRange(0, 10) == 0;
    now += *rc::gen::inRange(0, 3) == 0 ? 2000 : 10;
    const bool fail = *rc::gen::inRange(0, 10) == 0;
    for (auto& f : fams) {
      send_events(f->ic, docs, next_docs, *next);
      IncrementalSyncOptions io;
      io.force_full = force_full;
      io.now_ms = now;
      DiagSink d1;
      bool ref_full = !f->ref.synced || force_full || f->ref.failed;
      auto inc = f->ic.sync_nft(io, d1);
      auto ref = f->ref.sync(*next, &*prior, force_full, now);
      RC_ASSERT(inc.has_value() == ref.has_value());
      if (!inc) continue;
      check_same(*inc, *ref, inc->partial, "step " + std::to_string(step) + ", " + family_name(f->family));
      check_full_program(f->ic, *next, f->family, "step " + std::to_string(step), &f->want);
      (void)ref_full;
      ++counter.syncs;
      counter.partial += inc->partial;
      counter.subset += inc->sync.ports_visited < ref->ports_visited;
      counter.cleanups += !inc->sync.cleanup.empty();
      if (fail) {  // the kernel refused the transaction: both sides roll back and sync fully next
        f->ic.restore_failed();
        nftables::sync_failed(f->ref.state);
        f->ref.failed = true;
        ++counter.failures;
      }
    }
    c = std::move(next_c);
    docs = std::move(next_docs);
    prior = std::move(next);
  }
}

}  // namespace kpc::test
