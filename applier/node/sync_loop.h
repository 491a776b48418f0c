// The applier's sync loop (issue 15 §2): object events in, programs into the kernel out, with
// kube-proxy's rate limits and an online proof of every partial before the kernel sees it.
//
// State machine, per call to tick() (the caller waits until next_sync_ms()):
//   IDLE --event--> PENDING; a sync runs at last_sync + minSyncPeriod when changes are
//   pending, else at last_sync + syncPeriod (kube-proxy's BoundedFrequencyRunner; after a
//   failure the retry is the periodic one, RetryAfter(syncPeriod), or earlier on a new event).
//   A sync, per IP family the node has:
//     full    at the first sync, after any failure of that family, every hour, or when the
//             IncrementalCompiler decides (a restart-class change): read the kernel first
//             (what kube-proxy reads: the nat chains; the nft table's chains, sets, elements),
//             compile, apply, ensure kube-proxy's jump rules, read the kernel back as the held
//             state;
//     partial otherwise: compile; verify held ⊕ partial ≡ full (--verify always|sampled|off;
//             iptables: verifier/equiv on the held RulesetState; nftables: the nft model, see
//             nft_equiv.h); on a failed proof the full program is applied instead (counted,
//             both programs kept in --state-dir); apply; held ⊕= partial (model).
//     failure of the tool: IncrementalCompiler::restore_failed() (the changes stay pending),
//             the family's next sync is full; the program is kept as last-failed.
//   Drift check, per family, after a successful partial sync once syncPeriod has passed since
//   the last check or full sync (the periodic sync, or a busy loop's next sync): nothing is
//   pending then, so the kernel must hold the full program of the held objects. The kernel is
//   read (iptables-save / nft list table) and the smallest repair computed (applier/core
//   repair.h with the jump rules, nft_repair.h: kube-proxy's part only, foreign rules never
//   looked at); a non-empty repair is applied, counted, logged, and the held state re-read.
// Nothing is ever cleaned up here (KEP-2448): the loop only writes kube-proxy's programs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "applier/node/clock.h"
#include "applier/node/dataplane.h"
#include "applier/node/object_store.h"
#include "applier/node/watch_events.h"
#include "compiler/driver/backend.h"

namespace kpc::applier {

enum class VerifyMode { Always, Sampled, Off };
std::optional<VerifyMode> parse_verify_mode(std::string_view s);
const char* verify_mode_name(VerifyMode m);

struct LoopOptions {
  BackendKind mode = BackendKind::IPTables;
  std::vector<IPFamily> families = {IPFamily::V4, IPFamily::V6};
  int64_t min_sync_period_ms = 1000;
  int64_t sync_period_ms = 30'000;
  int64_t full_sync_period_ms = 3'600'000;  ///< kube-proxy's FullSyncPeriod (1 h)
  VerifyMode verify = VerifyMode::Always;
  unsigned sample_every = 10;               ///< --verify=sampled: every Nth partial sync
  std::string state_dir;                    ///< "" = keep nothing on disk
  size_t keep_verify_failures = 20;
  /// The drift check off the sync thread: a due check is only published by the sync (the
  /// objects that sync applied, and the family's kernel generation); a checker thread
  /// (DriftChecker, or run_drift_checks()) reads the kernel, compiles and computes the repair
  /// without the loop's lock, and commits under it — unless a sync came in between (below).
  /// false: the check runs inline, right after the sync (tests, --once).
  bool drift_thread = false;
  /// A check invalidated this many times by syncs in between is redone under the loop's lock
  /// (syncs wait for it): a check is never starved by churn.
  unsigned drift_max_stale = 2;
  /// nftables proofs after a proven partial compare only the objects that changed (nft_equiv.h
  /// NftScope); every Nth of them also compares the whole tables (0: never), and counts a
  /// disagreement (Counters::nft_scope_mismatches; the whole comparison then decides).
  unsigned nft_whole_compare_every = 100;
};

/// The loop's options from a KubeProxyConfiguration: `mode` picks the back end and the
/// minSyncPeriod/syncPeriod of its section. ipvs (or anything kpc cannot apply) is refused:
/// nullopt with *error.
std::optional<LoopOptions> loop_options_for(const ProxyConfig& config, std::string* error);

struct FamilyReport {
  IPFamily family = IPFamily::V4;
  std::string kind;     ///< "full", "partial", "skipped" (no program: e.g. no address of the family)
  std::string reason;   ///< why full / skipped
  size_t services_changed = 0;
  size_t bytes = 0;     ///< program bytes applied (or attempted)
  double compile_ms = 0, verify_ms = 0, apply_ms = 0;
  std::string verdict = "not-verified";  ///< identical, equivalent, not-equivalent, cannot-prove, fails-to-apply
  bool fallback = false;  ///< the proof failed: the full program was applied instead
  bool ok = true;
  std::string error;
  size_t jumps_inserted = 0;
  /// iptables, full syncs: where the held state came from -- "program" (the program applied
  /// on the state read before, the kernel's dump found equal to it) or "dump" (they differed,
  /// or there was no state before: the dump is held).
  std::string held;
  /// nftables proofs: how the reference state was brought up to date -- "objects" (the kept
  /// state, redone for want_redone objects whose commands changed) or "whole" (the full
  /// transaction applied to an empty state; want_redone = its objects). nft_want.h.
  std::string want;
  size_t want_redone = 0;
  /// nftables proofs: where the proof's time went (ms): "reference" (the full text from the
  /// kept fragments), "partial" (the cleanup and the partial on the held state), "want" (the
  /// reference state brought up to date), "compare".
  std::map<std::string, double> proof_ms;
  /// nftables proofs: "whole", "scoped" (only the changed objects), "scoped+whole" (both).
  std::string compare;
  bool scope_mismatch = false;  ///< "scoped+whole" and the two disagreed (the whole one decided)
  /// iptables: rules written by this sync, and rules in kube-proxy's chains after it, by
  /// table ("nat", "filter") — kube-proxy's sync_proxy_rules_iptables_last/_total.
  std::map<std::string, size_t> rules_written, rules_total;
  /// The periodic drift check (every syncPeriod, after the sync): the kernel differed from
  /// the full program of the objects just applied (kube-proxy's part only) and the smallest
  /// repair was applied; drift says what was put back.
  bool drift_checked = false, drift_repaired = false;
  std::string drift;
  double drift_ms = 0;  ///< the check: read, full compile, repair computation (and apply)
};

struct SyncReport {
  bool ok = true;
  int64_t at_ms = 0;
  std::vector<FamilyReport> families;
};

struct Counters {
  uint64_t syncs = 0, full_syncs = 0, partial_syncs = 0, failed_syncs = 0;
  uint64_t verify_runs = 0, verify_failures = 0;  ///< failures = fallbacks to the full program
  uint64_t jumps_inserted = 0, state_dir_errors = 0;
  uint64_t drift_checks = 0, drift_repairs = 0;  ///< repairs = drift found and repaired
  /// Full syncs whose held state had to be the kernel's dump (the program's state differed
  /// from it, or none could be made): the next proofs parse the full program in full.
  uint64_t held_from_dump = 0;
  /// nftables proofs that compared only the changed objects, and those whose check against
  /// the whole comparison disagreed (LoopOptions::nft_whole_compare_every; expected 0).
  uint64_t nft_scoped_compares = 0, nft_scope_mismatches = 0;
};

/// A drift check published by a sync, for a checker thread: the objects the kernel must hold
/// (those of the family's last successful sync) and the kernel's generation then (every write
/// of the loop to the family's kernel — sync attempt or repair — advances it).
struct DriftJob {
  IPFamily family = IPFamily::V4;
  uint64_t generation = 0;
  std::shared_ptr<const Snapshot> objects;
  unsigned stale = 0;  ///< times this family's check was invalidated so far
  /// iptables: the held state as iptables-save prints it (filter, nat), when it is known to be
  /// the full program's on kube-proxy's part (a full sync or repair since, then only partials
  /// proven identical): the check first compares the kernel's dump with it chain by chain
  /// (digests of kube-proxy's chains and of its jumps in the built-in chains) and stops there
  /// when they are all equal -- no model load, no compile, no repair computation. Null: the
  /// full check.
  std::shared_ptr<const std::string> held_text;
};
/// What the unlocked part of a check found: clean (the kernel holds the full program, or an
/// equivalent one), a repair to apply, or an error (the kernel unreadable, no repair).
struct DriftPlan {
  bool ok = true, clean = false;
  std::string error, repair;  ///< repair: a restore program / nft transaction
  std::string what;           ///< JSON: what the repair puts back
  double ms = 0;              ///< the kernel read, the compile, the repair computation
  std::string path;           ///< "digest" (clean by the chain digests) or "full" (model, compile, repair)
  double cpu_ms = 0;          ///< the planning thread's CPU time (the tool reading the kernel not included)
};
struct DriftOutcome {
  IPFamily family = IPFamily::V4;
  /// clean; repaired; failed (the family's next sync is full); stale (a sync came in between
  /// and the check found drift: the repair is not applied, the check is redone against the
  /// newer sync).
  std::string result;
  std::string what;
  double ms = 0;
  std::string path;  ///< DriftPlan::path
  double cpu_ms = 0;  ///< DriftPlan::cpu_ms
};

class SyncLoop {
 public:
  using LogFn = std::function<void(const std::string& json_line)>;
  SyncLoop(LoopOptions opts, Clock& clock, Dataplane& dataplane, LogFn log = {});
  ~SyncLoop();
  SyncLoop(const SyncLoop&) = delete;
  SyncLoop& operator=(const SyncLoop&) = delete;

  // Events (every family's compiler and the held objects); each marks changes pending.
  void update_service(const Service& s);
  void delete_service(const std::string& ns, const std::string& name);
  void update_slice(const EndpointSlice& s);
  void delete_slice(const std::string& ns, const std::string& name);
  void update_node(const Node& n);
  void delete_node(const std::string& name);
  void update_service_cidr(const ServiceCIDR& c);
  void delete_service_cidr(const std::string& name);
  void apply_event(const WatchEvent& e);
  /// A whole snapshot (the --watch PATH source): updates and deletions.
  void replace_all(const Snapshot& snap);
  /// The node's configuration and host facts (--config); kept across replace_all when set.
  void set_config(const ProxyConfig& c, const NodeEnvironment* env);

  /// When the loop wants to sync next (the clock's ms).
  int64_t next_sync_ms() const;
  /// Syncs if due; nullopt when not.
  std::optional<SyncReport> tick();
  /// Syncs now, whatever the rate limits say.
  SyncReport sync_now();

  bool pending() const;
  /// A copy (the drift checker's thread counts too).
  Counters counters() const;

  // ---- the drift check on a thread of its own (LoopOptions::drift_thread). The three steps
  // are public so that tests interleave syncs with them; run_drift_checks() does all three.
  /// The checks due and not yet tried at the family's current generation.
  std::vector<DriftJob> take_drift_jobs();
  /// Without the loop's lock: reads the kernel, compiles the full program of job.objects,
  /// computes the smallest repair. Touches no loop state (the dataplane's read must be
  /// callable from another thread, as KernelDataplane's is).
  DriftPlan plan_drift(const DriftJob& job) const;
  /// Under the loop's lock. A sync since the job (the generation moved): a clean plan still
  /// stands (a sync only writes chains to the newer sync's full program, and a chain it did
  /// not write has the same content in both: so "no drift" seen by the stale check holds),
  /// a repair does not (it could put back an older program's chain): result "stale", and the
  /// family's next job is the check against the newer sync. Otherwise the repair is applied,
  /// counted, logged, and the held state re-read, as the inline check does.
  DriftOutcome commit_drift(const DriftJob& job, const DriftPlan& plan);
  /// take + plan + commit for each due family; a family stale drift_max_stale times is
  /// planned and committed under the lock.
  std::vector<DriftOutcome> run_drift_checks();
  /// Blocks until a check is due (take_drift_jobs() would return one), stop_drift_waits(),
  /// or timeout_ms.
  void wait_drift_jobs(int64_t timeout_ms);
  void stop_drift_waits();
  const LoopOptions& options() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kpc::applier
