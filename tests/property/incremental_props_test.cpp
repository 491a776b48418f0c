// The incremental compiler (compiler/driver/incremental.h) against the batch path, over
// random clusters and random sequences of changes: after every sync, its program must be
// byte for byte the batch path's -- compile_iptables for the first sync,
// compile_iptables_from_prior(next, prior) for every later one -- with the same partial
// flag, full-sync reason, changed services and counters. IPv4 and IPv6.
//
// Each step applies 1-3 of the everyday changes the kernel partial-restore property uses
// (tests/support/cluster_changes.h), sometimes also: endpoints added to or removed from a
// ~1000-endpoint Service so that large-cluster mode flips, changes to this node (topology
// zone: a full sync) or to another node, configuration changes (masqueradeAll: a full
// sync; syncPeriod), re-sent unchanged objects, forced full syncs, throttled stale-chain
// cleanups (the kernel then keeps stale chains: the batch side is told what the kernel
// has by a simulation of the nat table's chains written here, independent of the
// compiler), and syncs with no change at all. The compiler only ever sees object events,
// derived here by comparing the rendered documents of consecutive clusters.
//
// Size: 100 cases (rapidcheck's default) x 1-8 syncs x 2 families; the count of compared
// syncs is printed at exit. RC_PARAMS="max_success=2000" for a long run.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "compiler/driver/compile.h"
#include "compiler/driver/incremental.h"
#include "compiler/iptables/chain_names.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/cluster_events.h"
#include "tests/support/snapshot_gen.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

using testgen::GeneratedCluster;
using Key = std::pair<std::string, std::string>;

struct SyncCounter {
  int syncs = 0, partial = 0, large = 0, flips = 0, skipped_cleanups = 0, deleted_chains = 0, full_programs = 0;
  ~SyncCounter() {
    if (syncs)
      std::fprintf(stderr,
                   "IncrementalProps: %d syncs compared with the batch path (%d partial, %d in large-cluster mode, "
                   "%d flipping it, %d with a throttled cleanup, %d deleting stale chains; %d full_program texts)\n",
                   syncs, partial, large, flips, skipped_cleanups, deleted_chains, full_programs);
  }
};
SyncCounter counter;

// ------------------------------------------------------------------ extra changes
// Addresses of the bulk Services' endpoints: 10.251.0.0/16, fd00:10:251::/64.
std::string bulk_ip(bool v6, int n) {
  char buf[48];
  if (v6) std::snprintf(buf, sizeof buf, "fd00:10:251::%x", n + 1);
  else std::snprintf(buf, sizeof buf, "10.251.%d.%d", n / 250, n % 250 + 1);
  return buf;
}

// A Service per family with `endpoints` endpoints (in two slices: a slice holds at most
// 1000), close to kube-proxy's 1000-endpoint threshold so that scaling it by a few flips
// large-cluster mode.
void add_bulk_services(GeneratedCluster& c, int endpoints) {
  for (bool v6 : {false, true}) {
    testgen::GenService s;
    s.ns = "bulk";
    s.name = v6 ? "big6" : "big4";
    s.cluster_ips = {v6 ? "fd00:10:99::1" : "10.99.0.1"};
    s.ports.push_back({"", "TCP", 80, 8080, "", 0, ""});
    c.services.push_back(s);
    for (int half = 0; half < 2; ++half) {
      testgen::GenSlice sl;
      sl.ns = s.ns;
      sl.name = s.name + "-" + std::to_string(half);
      sl.service_name = s.name;
      sl.address_type = v6 ? "IPv6" : "IPv4";
      sl.ports.push_back({"", "TCP", 8080});
      for (int e = half; e < endpoints; e += 2) sl.endpoints.push_back({{bulk_ip(v6, e)}, {}, {}, {}, "", ""});
      c.slices.push_back(sl);
    }
  }
}

void resize_bulk(GeneratedCluster& c, int serial) {
  int delta = *rc::gen::inRange(1, 7) * (*rc::gen::arbitrary<bool>() ? 1 : -1);
  for (auto& sl : c.slices) {
    if (sl.ns != "bulk" || sl.name.back() != '1') continue;
    bool v6 = sl.address_type == "IPv6";
    for (int i = 0; i < delta; ++i)
      sl.endpoints.push_back({{bulk_ip(v6, 1000 + serial * 8 + i)}, {}, {}, {}, "", ""});
    for (int i = 0; i < -delta && !sl.endpoints.empty(); ++i) sl.endpoints.pop_back();
  }
}

// ------------------------------------------------------------------ the kernel's nat chains
// What `iptables-restore --noflush` leaves in the nat table: declared chains exist, "-X"
// deletes. (Declaring flushes; a table not in the program is untouched.)
void apply_nat_chains(std::set<std::string>& chains, const std::string& program) {
  std::istringstream in(program);
  bool nat = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("*", 0) == 0) nat = line == "*nat";
    if (!nat) continue;
    if (line.rfind(":", 0) == 0) chains.insert(line.substr(1, line.find(' ') - 1));
    else if (line.rfind("-X ", 0) == 0) chains.erase(line.substr(3));
  }
}

// ------------------------------------------------------------------ comparison
std::string describe(const CompileResult& r) {
  const auto& s = r.sync;
  std::ostringstream o;
  o << "partial=" << r.partial << " reason=[" << r.full_sync_reason << "] changed={";
  for (const auto& c : r.changed_services) o << c << ",";
  o << "} chains=" << s.chains_written << " rules=" << s.rules_written << " filter=" << s.filter_rules
    << " nat_written=" << s.nat_rules_written << " nat_skipped=" << s.nat_rules_skipped
    << " deleted=" << s.deleted_chains << " no_local=" << s.no_local_endpoints_internal << "/"
    << s.no_local_endpoints_external << " endpoints=" << s.total_endpoints << " large=" << s.large_cluster;
  return o.str();
}

void check_same(const CompileResult& incremental, const CompileResult& batch, const std::string& what) {
  if (describe(incremental) != describe(batch))
    RC_FAIL(what + ": results differ\n incremental: " + describe(incremental) + "\n batch:       " + describe(batch));
  if (incremental.text != batch.text) {
    RC_FAIL(what + ": texts " + first_difference(incremental.text, batch.text, "incremental", "batch", 200) +
            "\n--- batch program\n" + batch.text);
  }
}

// One family's compiler and its reference state.
struct Family {
  Backend backend;
  IncrementalCompiler ic;
  std::set<std::string> kernel_nat_chains;  ///< the simulation above, fed every program
  bool kernel_has_leftovers = false;        ///< a throttled cleanup may have left stale chains
  bool large_cluster = false;               ///< mode of the last sync
  explicit Family(Backend b) : backend(b), ic(b) {}
};

// kpc-applier's proof reference (IncrementalCompiler::full_program): after any sync, the
// full program assembled from the kept fragments, with the kernel's nat chains as they are
// now, is byte for byte the batch path's full program of the synced state on that kernel.
void check_full_program(const Family& f, const Snapshot& synced, const std::string& where) {
  std::vector<std::string> kernel(f.kernel_nat_chains.begin(), f.kernel_nat_chains.end());
  // A stale per-service chain that is not in the kernel too (it must not be deleted: a -X of
  // a missing chain fails the restore): only the kernel's chains count.
  if (*rc::gen::inRange(0, 2) == 0) kernel.push_back("KUBE-SEP-NOTINTHEPROGRAM1");
  iptables::SyncOptions so;
  so.existing_nat_chains = kernel;
  DiagSink d;
  auto batch = compile_iptables(synced, f.backend, so, d);
  auto full = f.ic.full_program(std::vector<std::string_view>(kernel.begin(), kernel.end()));
  RC_ASSERT(batch.has_value() == full.has_value());
  if (!batch) return;
  if (*full != batch->text) {
    RC_LOG() << where << ", " << (f.backend == Backend::IPTables ? "IPv4" : "IPv6")
             << ": full_program differs from compile_iptables\n";
    RC_FAIL("IncrementalCompiler::full_program != compile_iptables");
  }
  ++counter.full_programs;
}

// A random cluster (with `bulk` Services near the large-cluster threshold), synced, then a
// random sequence of changes, each synced by both paths and compared.
void run_sequence(bool bulk) {
  testgen::GenOptions go;
  go.max_services = 6;
  GeneratedCluster c = make_compilable(*testgen::gen_cluster(go));
  // (rapidcheck's ranges lean to their lower end: count down from the threshold.)
  if (bulk) add_bulk_services(c, 1000 - *rc::gen::inRange(0, 12));
  auto prior = load_compilable(c);
  RC_PRE(prior.has_value());

  std::vector<std::unique_ptr<Family>> families;
  for (Backend b : {Backend::IPTables, Backend::IP6Tables}) families.push_back(std::make_unique<Family>(b));
  for (auto& f : families) {
    f->ic.replace_all(*prior);
    DiagSink d1, d2;
    auto inc = f->ic.sync({}, d1);
    auto batch = compile_iptables(*prior, f->backend, {}, d2);
    RC_ASSERT(inc.has_value() == batch.has_value());
    if (!batch) continue;
    check_same(*inc, *batch, std::string("first sync, ") + (f->backend == Backend::IPTables ? "IPv4" : "IPv6"));
    apply_nat_chains(f->kernel_nat_chains, batch->text);
    check_full_program(*f, *prior, "first sync");
    f->large_cluster = batch->sync.large_cluster;
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
    } else if (kind <= (bulk ? 4 : 1)) {
      resize_bulk(next_c, ++serial);
    } else if (kind == 5) {
      change_host(next_c, ++serial);
    } else {
      for (int m = *rc::gen::inRange(1, 4); m > 0; --m) mutate_cluster(next_c, ++serial);
    }
    auto next = load_compilable(next_c);
    if (!next) continue;  // a change the API would refuse (rare): skip it
    Documents next_docs = documents(make_compilable(next_c));

    IncrementalSyncOptions io;
    PriorOptions po;
    io.force_full = po.force_full = *rc::gen::inRange(0, 8) == 0;
    switch (*rc::gen::inRange(0, 3)) {
      case 0: break;  // the last cleanup was long ago
      case 1: io.since_last_cleanup = po.since_last_cleanup = Duration::seconds(1); break;
      default: io.since_last_cleanup = po.since_last_cleanup = Duration::seconds(7200); break;
    }
    const bool explicit_chains = *rc::gen::inRange(0, 4) == 0;
    for (auto& f : families) {
      send_events(f->ic, docs, next_docs, *next);
      // The batch path needs the kernel's chains when they are more than the prior's own
      // (stale chains a throttled cleanup kept); the incremental compiler tracks them itself
      // unless told, as kube-proxy would read them from the kernel.
      std::vector<std::string> kernel(f->kernel_nat_chains.begin(), f->kernel_nat_chains.end());
      PriorOptions bo = po;
      IncrementalSyncOptions fo = io;
      if (f->kernel_has_leftovers || explicit_chains) bo.existing_nat_chains = kernel;
      if (explicit_chains) fo.existing_nat_chains = kernel;
      DiagSink d1, d2;
      auto inc = f->ic.sync(fo, d1);
      auto batch = compile_iptables_from_prior(*next, *prior, f->backend, bo, d2);
      RC_ASSERT(inc.has_value() == batch.has_value());
      if (!batch) continue;
      check_same(*inc, *batch,
                 "step " + std::to_string(step) + ", " + (f->backend == Backend::IPTables ? "IPv4" : "IPv6"));
      apply_nat_chains(f->kernel_nat_chains, batch->text);
      check_full_program(*f, *next, "step " + std::to_string(step));
      ++counter.syncs;
      counter.partial += batch->partial;
      counter.large += batch->sync.large_cluster;
      counter.flips += batch->sync.large_cluster != f->large_cluster;
      f->large_cluster = batch->sync.large_cluster;
      counter.deleted_chains += batch->sync.deleted_chains > 0;
      bool skipped = batch->sync.large_cluster && po.since_last_cleanup &&
                     po.since_last_cleanup->ns <= next->config.iptables.sync_period.ns;
      counter.skipped_cleanups += skipped;
      // From now on the kernel may hold chains the prior state does not use.
      if (skipped) f->kernel_has_leftovers = true;
    }
    c = std::move(next_c);
    docs = std::move(next_docs);
    prior = std::move(next);
  }
}

}  // namespace

RC_GTEST_PROP(IncrementalProps, SameProgramsAsTheBatchPath, ()) { run_sequence(*rc::gen::arbitrary<bool>()); }

// The same with the ~1000-endpoint Services always there and scaled often: large-cluster
// mode flips, throttled cleanups and their leftover chains.
RC_GTEST_PROP(IncrementalProps, SameProgramsAroundTheLargeClusterThreshold, ()) { run_sequence(true); }

}  // namespace kpc::test
