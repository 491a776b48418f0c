#include "applier/node/sync_loop.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "applier/core/nft_repair.h"
#include "applier/core/repair.h"
#include "applier/node/nft_equiv.h"
#include "applier/node/nft_held.h"
#include "applier/node/nft_want.h"
#include "applier/node/state_dir.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/compile_nftables.h"
#include "compiler/driver/incremental.h"
#include "verifier/equiv/verify.h"
#include "verifier/nft/nft.h"
#include "verifier/trace/tracer.h"

namespace kpc::applier {

namespace vn = verifier::nft;
using json = nlohmann::json;

std::optional<VerifyMode> parse_verify_mode(std::string_view s) {
  if (s == "always") return VerifyMode::Always;
  if (s == "sampled") return VerifyMode::Sampled;
  if (s == "off") return VerifyMode::Off;
  return std::nullopt;
}
const char* verify_mode_name(VerifyMode m) {
  return m == VerifyMode::Always ? "always" : m == VerifyMode::Sampled ? "sampled" : "off";
}

std::optional<LoopOptions> loop_options_for(const ProxyConfig& c, std::string* error) {
  LoopOptions o;
  auto ms = [](Duration d) { return d.ns / 1'000'000; };
  switch (c.mode) {
    case ProxyMode::IPTables:
      o.mode = BackendKind::IPTables;
      o.min_sync_period_ms = ms(c.iptables.min_sync_period);
      o.sync_period_ms = ms(c.iptables.sync_period);
      break;
    case ProxyMode::NFTables:
      o.mode = BackendKind::NFTables;
      o.min_sync_period_ms = ms(c.nftables.min_sync_period);
      o.sync_period_ms = ms(c.nftables.sync_period);
      break;
    case ProxyMode::IPVS:
      *error = "KubeProxyConfiguration.mode is \"ipvs\": kpc-applier applies the iptables and nftables modes only "
               "(kpc compiles IPVS programs, `kpc compile --backend ipvs -o DIR`, but does not apply them yet, issue 17); "
               "use mode iptables or nftables";
      return std::nullopt;
  }
  if (o.sync_period_ms <= 0) o.sync_period_ms = 30'000;
  if (o.min_sync_period_ms < 0) o.min_sync_period_ms = 0;
  return o;
}

static const char* fam(IPFamily f) { return f == IPFamily::V4 ? "ipv4" : "ipv6"; }
static vn::Family nft_family(IPFamily f) { return f == IPFamily::V4 ? vn::Family::Ip : vn::Family::Ip6; }

// Only the tables kube-proxy writes (filter, nat) of an iptables-save dump: other tables'
// foreign rules are not the proof's business (and may use matches kpc does not read).
static std::string kube_tables(const std::string& save) {
  std::string out;
  bool keep = false;
  for (size_t pos = 0; pos < save.size();) {
    size_t nl = save.find('\n', pos);
    if (nl == std::string::npos) nl = save.size();
    std::string_view l(save.data() + pos, nl - pos);
    if (!l.empty() && l[0] == '*') keep = l == "*filter" || l == "*nat";
    if (keep && !l.empty() && l[0] != '#') out.append(l).push_back('\n');
    pos = nl + 1;
  }
  return out;
}

// The compiler's parts of the full transaction as the proof's reference takes them.
static std::vector<NftWant::Part> want_parts(const std::vector<IncrementalCompiler::NftPart>& parts) {
  std::vector<NftWant::Part> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back({p.id, p.version, p.text});
  return out;
}

struct FamilyState {
  IPFamily family;
  std::unique_ptr<IncrementalCompiler> ic;
  bool synced = false, needs_full = true;
  std::string needs_full_reason;  ///< why needs_full was set, when not a failed apply
  int64_t last_full_ms = 0;
  int64_t last_drift_check_ms = 0;  ///< the last drift check or full sync (which reads the kernel back)
  // The kernel as the applier holds it (read at every full sync, then advanced by the model).
  std::optional<verifier::RulesetState> held;
  std::optional<vn::NftState> held_nft;
  /// nftables: the proof's reference state, the full transaction's, kept from proof to proof
  /// and redone object by object (nft_want.h).
  NftWant nft_want;
  /// iptables: the held state's kube-proxy part is the full program's (a full sync, a drift
  /// repair, and since then only partials proven "identical"): the drift check may then
  /// compare the kernel with it chain by chain (drift_digest_clean) before anything heavier.
  bool held_proven = false;
  /// nftables: the last sync applied a proven partial in place, and since then nothing else
  /// changed the held state or the reference state: the two differ at most in the stale
  /// chains nft_stale, so the next proof compares only what the partial and the reference's
  /// update change (and those chains): NftScope. Consumed by the next sync (each sync starts
  /// by clearing it), cleared by a drift commit.
  bool nft_scope_valid = false;
  std::vector<std::string> nft_stale;
  uint64_t nft_scoped_proofs = 0;
  ChainSet jump_targets;  ///< chains the last full iptables program declared
  uint64_t partials = 0;
  // The drift check on its own thread (LoopOptions::drift_thread).
  uint64_t generation = 0;        ///< the loop's writes to this family's kernel (syncs, repairs)
  bool drift_due = false;         ///< a check is wanted (syncPeriod passed since the last one)
  std::shared_ptr<const Snapshot> drift_objects;  ///< what the last successful sync applied
  uint64_t drift_taken_generation = UINT64_MAX;   ///< a job was handed out at this generation
  unsigned drift_stale = 0;
};

struct SyncLoop::State {
  LoopOptions opts;
  Clock& clock;
  Dataplane& dp;
  LogFn log;
  ObjectStore store;
  std::vector<FamilyState> families;
  Counters counters;
  bool dirty = true;  ///< events since the last sync attempt
  bool ever = false;
  int64_t last_run_ms = 0;
  std::optional<ProxyConfig> config_override;
  std::optional<NodeEnvironment> env_override;
  uint64_t report_seq = 0;
  // Held by a sync and by a drift commit: the two writers of the kernel and of the held state.
  mutable std::mutex mu;
  std::condition_variable drift_cv;
  bool drift_wait_stopped = false;

  State(LoopOptions o, Clock& c, Dataplane& d, LogFn l) : opts(std::move(o)), clock(c), dp(d), log(std::move(l)) {
    for (IPFamily f : opts.families) {
      FamilyState fs;
      fs.family = f;
      fs.ic = std::make_unique<IncrementalCompiler>(Target{opts.mode, f});
      families.push_back(std::move(fs));
    }
  }

  template <class F>
  void each(F f) {
    for (auto& fs : families) f(*fs.ic);
    dirty = true;
  }

  void state_write(const std::string& name, const std::string& text) {
    if (opts.state_dir.empty()) return;
    std::string err;
    if (!make_dirs(opts.state_dir) || !write_file_atomic(opts.state_dir + "/" + name, text, &err)) {
      ++counters.state_dir_errors;
      if (log) log(json{{"msg", "state-dir write failed"}, {"file", name}, {"error", err}}.dump());
    }
  }

  std::string program_name(const char* what, IPFamily f) const {
    return std::string(what) + "-" + backend_kind_name(opts.mode) + "-" + fam(f) +
           (opts.mode == BackendKind::IPTables ? ".restore" : ".nft");
  }

  void keep_verify_failure(IPFamily f, const std::string& prior, const std::string& partial, const std::string& full,
                           const std::string& report) {
    if (opts.state_dir.empty()) return;
    std::string base = opts.state_dir + "/verify-failures";
    char seq[32];
    std::snprintf(seq, sizeof seq, "%06llu", static_cast<unsigned long long>(++report_seq));
    std::string dir = base + "/" + std::to_string(clock.now_ms()) + "-" + seq + "-" + backend_kind_name(opts.mode) + "-" + fam(f);
    if (!make_dirs(dir)) {
      ++counters.state_dir_errors;
      return;
    }
    std::string ext = opts.mode == BackendKind::IPTables ? ".restore" : ".nft";
    std::string err;
    bool ok = write_file_atomic(dir + "/prior" + (opts.mode == BackendKind::IPTables ? ".save" : ".nft"), prior, &err) &&
              write_file_atomic(dir + "/partial" + ext, partial, &err) &&
              write_file_atomic(dir + "/full" + ext, full, &err) && write_file_atomic(dir + "/report.txt", report, &err);
    if (!ok) ++counters.state_dir_errors;
    // Keep the newest N.
    std::vector<std::string> names;
    if (DIR* d = opendir(base.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') names.push_back(e->d_name);
      closedir(d);
    }
    std::sort(names.begin(), names.end());
    for (size_t i = 0; i + opts.keep_verify_failures < names.size(); ++i) {
      std::string victim = base + "/" + names[i];
      if (DIR* d = opendir(victim.c_str())) {
        while (dirent* e = readdir(d))
          if (e->d_name[0] != '.') ::unlink((victim + "/" + e->d_name).c_str());
        closedir(d);
      }
      ::rmdir(victim.c_str());
    }
  }

  bool verify_now(FamilyState& fs) {
    if (opts.verify == VerifyMode::Always) return true;
    if (opts.verify == VerifyMode::Off) return false;
    return fs.partials % std::max(1u, opts.sample_every) == 1 % std::max(1u, opts.sample_every);
  }

  // Reads the kernel into the held state. False (held cleared) when it cannot be read.
  // iptables: with `store`, the dump's rules are interned there (to compare with a state on it).
  bool read_held(FamilyState& fs, std::string* error, std::shared_ptr<verifier::RuleStore> store = nullptr) {
    std::string text;
    auto r = dp.read(opts.mode, fs.family, &text);
    if (!r.ok) {
      fs.held.reset(), fs.held_nft.reset();
      *error = "reading the kernel: " + r.error;
      return false;
    }
    if (opts.mode == BackendKind::IPTables) {
      verifier::RulesetState st = verifier::RulesetState::empty(fs.family, store);
      std::string err;
      if (!verifier::load_save(kube_tables(text), fs.family, dp.flavor(), st, &err, store)) {
        fs.held.reset();
        *error = "the kernel's rules cannot be read by kpc's model: " + err;
        return false;
      }
      fs.held = std::move(st);
    } else {
      vn::NftState st;
      if (!text.empty()) {
        vn::NftError err;
        if (!vn::parse_listing(text, "nft-list", &st, &err)) {
          fs.held_nft.reset();
          *error = "the kernel's kube-proxy table cannot be read by kpc's model: " + err.to_string();
          return false;
        }
      }
      fs.held_nft = std::move(st);
    }
    return true;
  }

  double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  static std::vector<std::string_view> nat_chain_names(const verifier::RulesetState& st) {
    std::vector<std::string_view> chains;
    const auto& nat = st.table(ir::TableId::Nat);
    chains.reserve(nat.chains.size());
    for (const auto& c : nat.chains)
      if (!c.builtin) chains.emplace_back(c.name);
    return chains;
  }

  // What ensure_jumps did to the kernel, on a model state: kube-proxy's jumps whose target the
  // program declares, each inserted at the top of its built-in chain when missing, in
  // kube-proxy's order (KernelDataplane::ensure_jumps: -C, then -I).
  bool model_jumps(verifier::RulesetState& st, const ChainSet& targets) const {
    std::string decl[2];
    for (const auto& [t, c] : targets) decl[t == ir::TableId::Nat] += ":" + c + " - [0:0]\n";
    std::string prog[2];
    for (const auto& j : missing_jumps(st, "*filter\n" + decl[0] + "COMMIT\n*nat\n" + decl[1] + "COMMIT\n"))
      prog[j.table == ir::TableId::Nat] += "-I " + j.chain + " 1 " + j.rule + "\n";
    std::string text;
    if (!prog[0].empty()) text += "*filter\n" + prog[0] + "COMMIT\n";
    if (!prog[1].empty()) text += "*nat\n" + prog[1] + "COMMIT\n";
    if (text.empty()) return true;
    verifier::ApplyOptions o;
    o.noflush = true;
    o.flavor = dp.flavor();
    return verifier::apply_text(st, text, o).ok();
  }

  // The held state after a successful full sync. iptables: the state the sync's own program
  // gives on the kernel as read before the sync (the restore model, exactly what the kernel
  // ran, then kube-proxy's jumps as ensure_jumps inserted them) -- accepted only when the
  // kernel's dump, read now, is the same state chain by chain (same chains, policies and
  // rules by canonical text: verifier::diff_states on one rule store). Held that way, the
  // full program's lines are known lines of the store, so the next proofs read them without
  // parsing. Otherwise (no state before the sync, the model and the kernel disagree) the dump
  // is held, as before, counted (held_from_dump) and logged. nftables: the kernel's listing.
  void hold_after_full(FamilyState& fs, const std::string& program, FamilyReport* rep) {
    std::string err;
    std::optional<verifier::RulesetState> from_text;
    if (opts.mode == BackendKind::IPTables && fs.held) {
      verifier::RulesetState st = std::move(*fs.held);
      fs.held.reset();
      verifier::ApplyOptions ao;
      ao.noflush = true;
      ao.flavor = dp.flavor();
      ao.discard_on_failure = true;
      if (verifier::apply_text(st, program, ao).ok() && model_jumps(st, fs.jump_targets)) from_text = std::move(st);
    }
    if (!read_held(fs, &err, from_text ? from_text->store : nullptr)) {
      if (log) log(json{{"msg", "held state unavailable"}, {"family", fam(fs.family)}, {"error", err}}.dump());
      return;
    }
    if (opts.mode != BackendKind::IPTables) return;
    std::vector<verifier::ChainDiff> diffs;
    if (from_text) diffs = verifier::diff_states(*from_text, *fs.held);
    if (from_text && diffs.empty()) {
      fs.held = std::move(from_text);
      rep->held = "program";
      return;
    }
    ++counters.held_from_dump;
    rep->held = "dump";
    if (log) {
      json j{{"msg", "held state from the kernel's dump"}, {"family", fam(fs.family)}};
      if (!from_text) j["why"] = "no model state of the kernel before the sync";
      else {
        j["why"] = "the kernel's dump differs from the program applied on the state read before";
        j["chains_differing"] = diffs.size();
        j["first"] = verifier::describe(diffs.front());
      }
      log(j.dump());
    }
  }

  FamilyReport sync_family(FamilyState& fs, int64_t now) {
    FamilyReport rep;
    rep.family = fs.family;
    const bool scope_valid = std::exchange(fs.nft_scope_valid, false);
    std::vector<std::string> stale_before = std::move(fs.nft_stale);
    fs.nft_stale.clear();
    std::vector<std::string> stale_after;
    bool full = !fs.synced || fs.needs_full || now - fs.last_full_ms >= opts.full_sync_period_ms;
    std::string full_reason = !fs.synced      ? "first sync"
                              : fs.needs_full ? (fs.needs_full_reason.empty() ? "the last sync failed" : fs.needs_full_reason)
                                              : "hourly full sync";
    IncrementalSyncOptions so;
    so.force_full = full;
    so.now_ms = now;
    std::string read_error;
    std::optional<nftables::KernelListing> listing;
    if (full && opts.mode == BackendKind::IPTables && store.environment().nfacct_counters) {
      // kube-proxy creates its nfacct counters at start-up; the programs match on them.
      auto nr = dp.ensure_nfacct({"ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts"});
      if (!nr.ok && log) log(json{{"msg", "nfacct counters"}, {"error", nr.error}}.dump());
    }
    if (full) {
      // kube-proxy reads the kernel at a full sync: the nat chains (stale-chain deletion) or
      // the nft table (readOrReset). Unreadable: compile as if the node were fresh.
      if (read_held(fs, &read_error)) {
        if (fs.held) {
          std::vector<std::string> chains;
          const auto& nat = fs.held->table(ir::TableId::Nat);
          for (const auto& c : nat.chains)
            if (!c.builtin) chains.emplace_back(c.name);
          so.existing_nat_chains = std::move(chains);
        }
        if (fs.held_nft) {
          listing = kernel_listing(*fs.held_nft, nft_family(fs.family));
          if (listing) so.nft_listing = &*listing;
        }
      }
    }
    DiagSink diags;
    auto t0 = std::chrono::steady_clock::now();
    std::string program, cleanup;
    bool partial = false;
    std::set<std::string> changed;
    std::string compiler_reason;
    auto compile = [&](const IncrementalSyncOptions& o) -> bool {
      if (opts.mode == BackendKind::IPTables) {
        auto r = fs.ic->sync(o, diags);
        if (!r) return false;
        program = std::move(r->text), cleanup.clear(), partial = r->partial, changed = r->changed_services;
        compiler_reason = r->full_sync_reason;
      } else {
        auto r = fs.ic->sync_nft(o, diags);
        if (!r) return false;
        program = std::move(r->text), cleanup = std::move(r->cleanup_text), partial = r->partial;
        changed = r->changed_services, compiler_reason = r->full_sync_reason;
      }
      return true;
    };
    if (!compile(so)) {
      rep.kind = "skipped";
      for (const auto& d : diags.all())
        if (!is_warning(d.code)) {
          rep.reason = std::string(diag_info(d.code).code) + " " + d.message;
          break;
        }
      return rep;
    }
    rep.compile_ms = ms_since(t0);
    rep.kind = partial ? "partial" : "full";
    rep.reason = partial ? "" : (full ? full_reason : compiler_reason);
    rep.services_changed = changed.size();

    // ---- the proof (partial syncs only)
    // nftables: the partial already applied to the held state by the proof (in_place), and
    // what it changed there, to put back should the kernel refuse it.
    std::optional<NftTouched> touched;
    bool in_place = false;
    if (partial) {
      ++fs.partials;
      if (verify_now(fs)) {
        auto tv = std::chrono::steady_clock::now();
        ++counters.verify_runs;
        bool proven = false;
        std::string report, prior_text, full_text;
        DiagSink vd;
        if (opts.mode == BackendKind::IPTables) {
          // The reference: the full program kube-proxy would write now on the held kernel (its
          // stale per-service chains deleted), assembled from the incremental compiler's
          // fragments -- byte for byte compile_iptables(snapshot, {existing_nat_chains}), the
          // property IncrementalProps checks -- instead of a second full compile (~0.7 s at
          // 10,000 Services). With the stale chains the partial deletes also deleted by the
          // reference, a plain endpoint change is "identical", not "equivalent".
          std::optional<std::string> ref;
          if (fs.held) ref = fs.ic->full_program(nat_chain_names(*fs.held));
          if (!fs.held) {
            rep.verdict = "cannot-prove";
            report = "no held state: " + read_error;
          } else if (!ref) {
            rep.verdict = "cannot-prove";
            report = "the full program cannot be compiled";
          } else {
            auto vr = verifier::verify(*fs.held, program, *ref, dp.flavor());
            rep.verdict = verifier::verdict_name(vr.verdict);
            proven = vr.verdict == verifier::Verdict::Identical || vr.verdict == verifier::Verdict::Equivalent;
            if (!proven) report = verifier::format_text(vr), full_text = std::move(*ref);
          }
          if (!proven && fs.held) prior_text = verifier::print_save(*fs.held, dp.flavor());
        } else {
          // The reference: kube-proxy's full transaction on a fresh node for the objects now,
          // assembled from the incremental compiler's kept fragments (byte for byte
          // compile_nftables, IncrementalNftProps), and its state on the model kept from the
          // last proof and redone only where the text changed (NftWant: the result is the
          // whole apply's). The partial runs on the held state in place, with a copy of only
          // the chains and sets it names (NftTouched), put back if the proof fails.
          auto ref = fs.ic->full_nft_program_parts();
          if (!fs.held_nft || !ref) {
            rep.verdict = "cannot-prove";
            report = !fs.held_nft ? "no held state: " + read_error : "the full transaction cannot be compiled";
          } else {
            const vn::Family nf = nft_family(fs.family);
            auto lap = [&, t = tv]() mutable {
              double d = ms_since(t);
              t = std::chrono::steady_clock::now();
              return d;
            };
            rep.proof_ms["reference"] = lap();
            touched = NftTouched::save(*fs.held_nft, nf, "kube-proxy", {cleanup, program});
            std::optional<vn::NftState> copy;
            if (!touched) copy = *fs.held_nft;  // a command beyond named chains and sets
            vn::NftState& got = touched ? *fs.held_nft : *copy;
            vn::ApplyResult a;
            a.ok = true;
            if (!cleanup.empty()) a = vn::apply_script(got, cleanup, "cleanup.nft");
            auto b = a.ok ? vn::apply_script(got, program, "partial.nft") : a;
            rep.proof_ms["partial"] = lap();
            auto wu = fs.nft_want.update(want_parts(*ref));
            rep.proof_ms["want"] = lap();
            rep.proof_ms["want_split"] = wu.parse_ms, rep.proof_ms["want_model"] = wu.apply_ms;
            rep.proof_ms["want_check"] = wu.check_ms;
            rep.want = wu.incremental ? "objects" : "whole";
            rep.want_redone = wu.incremental ? wu.objects_redone : wu.objects;
            if (!wu.incremental && log)
              log(json{{"msg", "proof reference applied whole"}, {"family", fam(fs.family)}, {"why", wu.why_whole}}.dump());
            const vn::ApplyResult& c = wu.apply;
            if (!b.ok || !wu.ok) {
              rep.verdict = (b.not_modelled() || c.not_modelled()) ? "cannot-prove" : "fails-to-apply";
              report = (!b.ok ? "partial: " + (b.error ? b.error->to_string() : "") : "full: " + (c.error ? c.error->to_string() : ""));
            } else {
              // Only what changed since the last proven partial, when nothing else changed
              // either state (FamilyState::nft_scope_valid); every Nth such proof also compares
              // the whole tables, and the whole comparison decides if they disagree.
              std::optional<NftScope> scope;
              if (scope_valid && touched && wu.incremental) {
                scope.emplace();
                touched->for_each_name([&](const std::string& n) { scope->chains.insert(n); },
                                       [&](const std::string& n) { scope->sets.insert(n); });
                scope->chains.insert(wu.redone_chains.begin(), wu.redone_chains.end());
                scope->sets.insert(wu.redone_sets.begin(), wu.redone_sets.end());
                scope->chains.insert(stale_before.begin(), stale_before.end());
              }
              auto cmp = compare_nft_tables(got, fs.nft_want.state_any_order(), nf, "kube-proxy", scope ? &*scope : nullptr);
              rep.compare = scope ? "scoped" : "whole";
              if (scope) {
                ++counters.nft_scoped_compares;
                const unsigned every = opts.nft_whole_compare_every;
                if (every && ++fs.nft_scoped_proofs % every == 0) {
                  auto whole = compare_nft_tables(got, fs.nft_want.state_any_order(), nf, "kube-proxy");
                  rep.compare = "scoped+whole";
                  if (whole.verdict != cmp.verdict || whole.differences != cmp.differences) {
                    ++counters.nft_scope_mismatches;
                    rep.scope_mismatch = true;
                    if (log)
                      log(json{{"msg", "scoped comparison disagrees with the whole comparison (the whole one decides)"},
                               {"family", fam(fs.family)}, {"scoped", nft_verdict_name(cmp.verdict)},
                               {"whole", nft_verdict_name(whole.verdict)}}.dump());
                    cmp = std::move(whole);
                  }
                }
              }
              stale_after = cmp.stale_chains;
              rep.verdict = nft_verdict_name(cmp.verdict);
              proven = cmp.verdict != NftVerdict::NotEquivalent;
              for (const auto& d : cmp.differences) report += d + "\n";
              rep.proof_ms["compare"] = lap();
            }
            if (!proven && touched) touched->restore(*fs.held_nft), touched.reset();
            in_place = proven && touched.has_value();
            if (!proven) full_text = fs.nft_want.text();
          }
          if (!proven && fs.held_nft) prior_text = vn::print_ruleset(*fs.held_nft);
        }
        rep.verify_ms = ms_since(tv);
        if (!proven) {
          // Never apply what could not be proven: the full program instead, and a bug report.
          ++counters.verify_failures;
          rep.fallback = true;
          keep_verify_failure(fs.family, prior_text, (cleanup.empty() ? "" : cleanup + "\n# ---- main\n") + program,
                              full_text, report);
          fs.ic->restore_failed();
          IncrementalSyncOptions fo = so;
          fo.force_full = true;
          std::vector<std::string> chains;
          if (fs.held) {
            for (const auto& c : fs.held->table(ir::TableId::Nat).chains)
              if (!c.builtin) chains.emplace_back(c.name);
            fo.existing_nat_chains = std::move(chains);
          }
          DiagSink d2;
          if (!compile(fo)) {
            rep.ok = false;
            rep.error = "the full program cannot be compiled after a failed proof";
            return rep;
          }
          full = true;
          rep.kind = "full";
          rep.reason = "the proof of the partial failed (" + rep.verdict + ")";
        }
      }
    }

    // ---- apply
    rep.bytes = program.size() + cleanup.size();
    auto ta = std::chrono::steady_clock::now();
    if (!cleanup.empty()) {
      // kube-proxy runs the stale-chain deletion first, in a transaction of its own; its
      // failure is logged, not fatal (the chains are retried later).
      auto r = dp.apply(opts.mode, fs.family, cleanup);
      if (!r.ok && log) log(json{{"msg", "stale-chain cleanup failed"}, {"family", fam(fs.family)}, {"error", r.error}}.dump());
      if (!r.ok && in_place) {
        // The held state took the cleanup the kernel did not: back to before, then as below.
        touched->restore(*fs.held_nft);
        in_place = false;
      } else if (r.ok && fs.held_nft && !in_place) {
        vn::apply_script(*fs.held_nft, cleanup, "cleanup.nft");
      }
    }
    ++fs.generation;  // a check planned before this write no longer describes the kernel
    auto ar = dp.apply(opts.mode, fs.family, program);
    if (ar.ok && opts.mode == BackendKind::IPTables) {
      if (!partial) {
        // Only the chains kube-proxy's jumps go to (ensure_jumps looks at no other; the
        // partial syncs' check below builds a declaration of each).
        std::set<std::pair<ir::TableId, std::string_view>> jumped;
        for (const auto& j : verifier::trace::kube_proxy_jumps()) jumped.insert({j.table, j.to});
        ChainSet targets;
        for (const auto& [t, cs] : program_chains(program).declared)
          for (const auto& c : cs)
            if (jumped.count({t, c})) targets.insert({t, c});
        fs.jump_targets = std::move(targets);
      }
      // kube-proxy's jump rules: -C, then -I when missing (at every full sync; at a partial
      // one only when the held state lacks one).
      bool check = full || !fs.held;
      if (!check) {
        std::string decl[2];
        for (const auto& [t, c] : fs.jump_targets) decl[t == ir::TableId::Nat] += ":" + c + " - [0:0]\n";
        check = !missing_jumps(*fs.held, "*filter\n" + decl[0] + "COMMIT\n*nat\n" + decl[1] + "COMMIT\n").empty();
      }
      if (check) {
        size_t n = 0;
        auto jr = dp.ensure_jumps(fs.family, fs.jump_targets, &n);
        rep.jumps_inserted = n;
        counters.jumps_inserted += n;
        if (!jr.ok) ar = jr;
      }
    }
    rep.apply_ms = ms_since(ta);
    if (!ar.ok && in_place) touched->restore(*fs.held_nft);  // the kernel rolled the partial back
    if (ar.ok && in_place && !full) fs.nft_scope_valid = true, fs.nft_stale = std::move(stale_after);
    if (!ar.ok) {
      fs.ic->restore_failed();
      fs.needs_full = true;
      rep.ok = false;
      rep.error = ar.error;
      state_write(program_name("last-failed", fs.family), program);
      state_write(program_name("last-failed", fs.family) + ".err", ar.error);
      return rep;
    }
    // ---- the held state follows the kernel
    if (full) {
      hold_after_full(fs, program, &rep);
      fs.held_proven = fs.held.has_value();
      fs.last_full_ms = fs.last_drift_check_ms = now;
      fs.needs_full = false;
      fs.needs_full_reason.clear();
      fs.drift_due = false, fs.drift_objects.reset(), fs.drift_stale = 0;  // a full sync is a check
      // The proofs' reference state is made once here, off the path of the first change
      // (the whole transaction on the model: 2.8 s for the 10,000-Service soak's 55 MB); the proofs after it
      // redo only the objects whose commands changed.
      if (opts.mode == BackendKind::NFTables && opts.verify != VerifyMode::Off && !fs.nft_want.valid())
        if (auto ref = fs.ic->full_nft_program_parts()) {
          auto tw = std::chrono::steady_clock::now();
          auto u = fs.nft_want.update(want_parts(*ref));
          if (log)
            log(json{{"msg", "proof reference prepared"}, {"family", fam(fs.family)}, {"ok", u.ok},
                     {"objects", u.objects}, {"ms", std::round(ms_since(tw))}}.dump());
        }
    } else if (opts.mode == BackendKind::IPTables && fs.held) {
      verifier::ApplyOptions ao;
      ao.noflush = true;
      ao.flavor = dp.flavor();
      ao.discard_on_failure = true;  // on a failure the held state is dropped anyway
      if (!verifier::apply_text(*fs.held, program, ao).ok()) fs.held.reset(), fs.needs_full = true;
      if (rep.verdict != "identical" || !fs.held) fs.held_proven = false;
    } else if (opts.mode == BackendKind::NFTables && fs.held_nft && !in_place) {
      if (!vn::apply_script(*fs.held_nft, program, "partial.nft").ok) fs.held_nft.reset(), fs.needs_full = true;
    }
    fs.synced = true;
    state_write(program_name("last-applied", fs.family), program);
    if (!full && now - fs.last_drift_check_ms >= opts.sync_period_ms) {
      fs.last_drift_check_ms = now;
      if (opts.drift_thread) {
        fs.drift_due = true;
      } else {
        auto td = std::chrono::steady_clock::now();
        ++counters.drift_checks;
        rep.drift_checked = true;
        DriftJob job{fs.family, fs.generation, store.shared_snapshot(), 0, held_text(fs)};
        DriftOutcome o = commit_drift_locked(fs, job, plan_drift(job));
        rep.drift_repaired = o.result == "repaired";
        rep.drift = o.what;
        rep.drift_ms = ms_since(td);
      }
    }
    if (opts.drift_thread && fs.drift_due) {
      // Publish the objects this sync applied: the checker compares the kernel with them.
      fs.drift_objects = store.shared_snapshot();
      drift_cv.notify_all();
    }
    if (opts.mode == BackendKind::IPTables) count_rules(fs, program, &rep);
    return rep;
  }

  // The held state as iptables-save prints it (filter and nat), for the drift check's chain
  // by chain comparison; null when the held state is not known to be the full program's.
  std::shared_ptr<const std::string> held_text(const FamilyState& fs) const {
    if (opts.mode != BackendKind::IPTables || !fs.held || !fs.held_proven) return nullptr;
    return std::make_shared<const std::string>(kube_tables(verifier::print_save(*fs.held, dp.flavor())));
  }

  // Per (table, chain) of kube-proxy's part -- its KUBE-* chains, and the rules of the built-in
  // chains that jump to one -- a digest of the chain's lines in order (the declaration without
  // its counters, then its rules), from iptables-save text.
  static std::unordered_map<std::string, uint64_t> chain_digests(const std::string& save) {
    std::unordered_map<std::string, uint64_t> out;
    std::string table;
    auto mix = [](uint64_t h, std::string_view l) {
      for (unsigned char c : l) h = (h ^ c) * 0x100000001b3ull;
      return (h ^ '\n') * 0x100000001b3ull;
    };
    for (size_t pos = 0; pos < save.size();) {
      size_t nl = save.find('\n', pos);
      if (nl == std::string::npos) nl = save.size();
      std::string_view l(save.data() + pos, nl - pos);
      pos = nl + 1;
      if (l.empty()) continue;
      if (l[0] == '*') {
        table = std::string(l.substr(1));
        continue;
      }
      std::string_view chain, line = l;
      if (l[0] == ':') {
        size_t sp = l.find(' ');
        chain = l.substr(1, sp == std::string_view::npos ? std::string_view::npos : sp - 1);
        size_t br = l.rfind(" [");
        if (br != std::string_view::npos && br > sp) line = l.substr(0, br);  // counters differ, meaningless
      } else if (l.rfind("-A ", 0) == 0) {
        chain = RuleStore_chain(l);
      } else {
        continue;  // COMMIT
      }
      const bool kube = chain.rfind("KUBE-", 0) == 0;
      if (!kube) {
        // A built-in chain: only kube-proxy's jumps in it (a foreign rule is not drift).
        if (l[0] == ':' || (l.find(" -j KUBE-") == std::string_view::npos && l.find(" -g KUBE-") == std::string_view::npos))
          continue;
      }
      std::string key = table + "/" + std::string(chain);
      auto [it, fresh] = out.try_emplace(std::move(key), 0xcbf29ce484222325ull);
      it->second = mix(it->second, line);
    }
    return out;
  }
  static std::string_view RuleStore_chain(std::string_view l) { return verifier::RuleStore::line_chain_word(l); }

  // The kernel's kube-proxy part is the held state's, chain by chain (see held_proven): no
  // drift, without loading the dump into the model, compiling or computing a repair.
  static bool drift_digest_clean(const std::string& kernel, const std::string& held) {
    return chain_digests(kernel) == chain_digests(held);
  }

  // The drift check (see sync_loop.h), in two parts so that the slow one can run on another
  // thread: plan_drift reads the kernel and computes the smallest repair against the objects
  // of a sync (no loop state touched); commit_drift_locked applies it under the loop's lock.
  // Anything that goes wrong (the kernel unreadable, no repair possible, the repair refused)
  // makes the family's next sync full, which re-reads the kernel and rewrites all of
  // kube-proxy's part — the repair of last resort.
  static double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  }

  DriftPlan plan_drift(const DriftJob& job) const {
    DriftPlan p;
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_ms();
    auto fail = [&](std::string why) {
      p.ok = false;
      p.error = std::move(why);
      p.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return p;
    };
    std::string text;
    auto rd = dp.read(opts.mode, job.family, &text);
    if (!rd.ok) return fail("reading the kernel: " + rd.error);
    if (opts.mode == BackendKind::IPTables && job.held_text && drift_digest_clean(kube_tables(text), *job.held_text)) {
      p.clean = true;
      p.path = "digest";
      p.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      p.cpu_ms = thread_cpu_ms() - c0;
      return p;
    }
    p.path = "full";
    const Snapshot& snap = *job.objects;
    DiagSink d;
    json what;
    if (opts.mode == BackendKind::IPTables) {
      verifier::RulesetState actual = verifier::RulesetState::empty(job.family);
      std::string err;
      if (!verifier::load_save(kube_tables(text), job.family, dp.flavor(), actual, &err))
        return fail("the kernel's rules cannot be read by kpc's model: " + err);
      auto want = compile_iptables(snap, job.family == IPFamily::V4 ? Backend::IPTables : Backend::IP6Tables, {}, d);
      if (!want) return fail("the full program cannot be compiled");
      RepairOptions ro;
      ro.flavor = dp.flavor();
      ro.ensure_jumps = true;  // kube-proxy's jumps in the built-in chains are its part too
      auto rr = repair(actual, want->text, ro);
      if (!rr.ok) return fail("no repair: " + rr.error);
      if (rr.stats.chains_written + rr.stats.chains_deleted + rr.stats.jumps_restored == 0) {
        p.clean = true;
      } else {
        p.repair = std::move(rr.program);
        what = {{"chains_written", rr.stats.chains_written},
                {"chains_deleted", rr.stats.chains_deleted},
                {"jumps_restored", rr.stats.jumps_restored}};
      }
    } else {
      vn::NftState actual;
      TableName only{nft_family(job.family), "kube-proxy"};
      std::string err;
      if (!text.empty() && !read_nft_state(text, "nft-list", &actual, &err, &only))
        return fail("the kernel's kube-proxy table cannot be read by kpc's model: " + err);
      NftOptions no;
      no.keep_state = false;
      auto want = compile_nftables(snap, job.family, no, d);
      if (!want) return fail("the full transaction cannot be compiled");
      // Equivalent is not drift: a partial sync leaves the chains of deleted Services in the
      // table, empty and unreferenced, for kube-proxy's deferred clean-up (nft_equiv.h).
      vn::NftState desired;
      if (vn::apply_script(desired, want->text, "full.nft").ok &&
          compare_nft_tables(actual, desired, nft_family(job.family), "kube-proxy").verdict != NftVerdict::NotEquivalent) {
        p.clean = true;
      } else {
        auto rr = repair_nft(actual, want->text, nft_family(job.family));
        if (!rr.ok) return fail("no repair: " + rr.error);
        if (rr.transaction.empty()) {
          p.clean = true;
        } else {
          p.repair = std::move(rr.transaction);
          what = {{"chains_rewritten", rr.stats.chains_rewritten + rr.stats.chains_recreated},
                  {"chains_created", rr.stats.chains_created},
                  {"chains_deleted", rr.stats.chains_deleted},
                  {"sets_created", rr.stats.sets_created + rr.stats.sets_recreated},
                  {"elements_added", rr.stats.elements_added},
                  {"elements_deleted", rr.stats.elements_deleted},
                  {"table_created", rr.stats.table_created}};
        }
      }
    }
    if (!p.clean) p.what = what.dump();
    p.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    p.cpu_ms = thread_cpu_ms() - c0;
    return p;
  }

  FamilyState* family_state(IPFamily f) {
    for (auto& fs : families)
      if (fs.family == f) return &fs;
    return nullptr;
  }

  // Called with mu held (or on the sync thread inside a sync). See SyncLoop::commit_drift.
  DriftOutcome commit_drift_locked(FamilyState& fs, const DriftJob& job, const DriftPlan& plan) {
    fs.nft_scope_valid = false;  // a repair may change the held state
    DriftOutcome o;
    o.family = fs.family;
    o.ms = plan.ms;
    o.path = plan.path;
    o.cpu_ms = plan.cpu_ms;
    const bool stale = fs.generation != job.generation;
    if (stale && !(plan.ok && plan.clean)) {
      ++fs.drift_stale;
      o.result = "stale";
      return o;
    }
    fs.drift_due = false, fs.drift_objects.reset(), fs.drift_stale = 0;
    auto give_up = [&](const std::string& why) {
      fs.needs_full = true;
      fs.needs_full_reason = "the drift check failed";
      if (log) log(json{{"msg", "drift check failed"}, {"family", fam(fs.family)}, {"error", why}, {"next", "full sync"}}.dump());
      o.result = "failed";
      return o;
    };
    if (!plan.ok) return give_up(plan.error);
    if (plan.clean) {
      o.result = "clean";
      return o;
    }
    ++fs.generation;
    auto ar = dp.apply(opts.mode, fs.family, plan.repair);
    if (!ar.ok) {
      state_write(program_name("last-failed", fs.family), plan.repair);
      state_write(program_name("last-failed", fs.family) + ".err", ar.error);
      return give_up("the repair was refused: " + ar.error);
    }
    ++counters.drift_repairs;
    o.result = "repaired";
    o.what = plan.what;
    if (log)
      log(json{{"msg", "drift repaired"}, {"family", fam(fs.family)}, {"repair", json::parse(plan.what)}, {"bytes", plan.repair.size()}}.dump());
    state_write("last-drift-repair-" + std::string(backend_kind_name(opts.mode)) + "-" + fam(fs.family) +
                    (opts.mode == BackendKind::IPTables ? ".restore" : ".nft"),
                plan.repair);
    std::string err;
    fs.held_proven = read_held(fs, &err);  // the kernel after the repair: kube-proxy's part is the full program's
    if (!fs.held_proven) give_up("held state after the repair: " + err), o.result = "repaired";
    return o;
  }

  // The rule counts kube-proxy exports: written now (the program's -A lines per table) and
  // held in its KUBE-* chains afterwards.
  static void count_rules(const FamilyState& fs, const std::string& program, FamilyReport* rep) {
    std::string table;
    for (size_t pos = 0; pos < program.size();) {
      size_t nl = program.find('\n', pos);
      if (nl == std::string::npos) nl = program.size();
      std::string_view l(program.data() + pos, nl - pos);
      if (!l.empty() && l[0] == '*') table = std::string(l.substr(1));
      else if (l.rfind("-A ", 0) == 0) ++rep->rules_written[table];
      pos = nl + 1;
    }
    if (!fs.held) return;
    for (ir::TableId t : {ir::TableId::Nat, ir::TableId::Filter}) {
      size_t n = 0;
      for (const auto& c : fs.held->table(t).chains)
        if (c.name.rfind("KUBE-", 0) == 0) n += c.rules.size();
      rep->rules_total[ir::table_name(t)] = n;
    }
  }

  SyncReport sync(int64_t now) {
    std::lock_guard<std::mutex> lock(mu);
    SyncReport r;
    r.at_ms = now;
    dirty = false;
    ever = true;
    last_run_ms = now;
    for (auto& fs : families) {
      FamilyReport fr = sync_family(fs, now);
      if (fr.kind == "skipped") {
        r.families.push_back(fr);
        continue;
      }
      ++counters.syncs;
      if (fr.kind == "full") ++counters.full_syncs;
      else ++counters.partial_syncs;
      if (!fr.ok) ++counters.failed_syncs, r.ok = false;
      r.families.push_back(std::move(fr));
    }
    for (const auto& fr : r.families) {
      json j{{"msg", "sync"},
             {"backend", backend_kind_name(opts.mode)},
             {"family", fam(fr.family)},
             {"kind", fr.kind},
             {"services_changed", fr.services_changed},
             {"bytes", fr.bytes},
             {"compile_ms", std::round(fr.compile_ms * 100) / 100},
             {"verify_ms", std::round(fr.verify_ms * 100) / 100},
             {"apply_ms", std::round(fr.apply_ms * 100) / 100},
             {"verdict", fr.verdict},
             {"result", fr.kind == "skipped" ? "skipped" : fr.ok ? "applied" : "failed"}};
      if (!fr.reason.empty()) j["reason"] = fr.reason;
      if (fr.fallback) j["fallback"] = "full";
      if (fr.jumps_inserted) j["jumps_inserted"] = fr.jumps_inserted;
      if (!fr.held.empty()) j["held"] = fr.held;
      if (!fr.want.empty()) j["want"] = fr.want, j["want_objects"] = fr.want_redone;
      if (!fr.compare.empty()) j["compare"] = fr.compare;
      for (const auto& [k, v] : fr.proof_ms) j["proof_ms"][k] = std::round(v * 10) / 10;
      if (!fr.error.empty()) j["error"] = fr.error.substr(0, 2000);
      if (fr.drift_checked) j["drift_ms"] = std::round(fr.drift_ms * 100) / 100;
      if (fr.drift_repaired) j["drift_repaired"] = json::parse(fr.drift);
      if (log) log(j.dump());
    }
    json st{{"syncs", counters.syncs},
            {"full_syncs", counters.full_syncs},
            {"partial_syncs", counters.partial_syncs},
            {"failed_syncs", counters.failed_syncs},
            {"verify_runs", counters.verify_runs},
            {"verify_failures", counters.verify_failures},
            {"jumps_inserted", counters.jumps_inserted},
            {"drift_checks", counters.drift_checks},
            {"drift_repairs", counters.drift_repairs},
            {"held_from_dump", counters.held_from_dump},
            {"state_dir_errors", counters.state_dir_errors},
            {"last_sync_ok", r.ok}};
    state_write("status.json", st.dump(2) + "\n");
    return r;
  }
};

SyncLoop::SyncLoop(LoopOptions opts, Clock& clock, Dataplane& dp, LogFn log)
    : s_(std::make_unique<State>(std::move(opts), clock, dp, std::move(log))) {}
SyncLoop::~SyncLoop() = default;

void SyncLoop::update_service(const Service& x) {
  s_->store.update_service(x);
  s_->each([&](IncrementalCompiler& ic) { ic.update_service(x); });
}
void SyncLoop::delete_service(const std::string& ns, const std::string& name) {
  s_->store.delete_service(ns, name);
  s_->each([&](IncrementalCompiler& ic) { ic.delete_service(ns, name); });
}
void SyncLoop::update_slice(const EndpointSlice& x) {
  s_->store.update_slice(x);
  s_->each([&](IncrementalCompiler& ic) { ic.update_slice(x); });
}
void SyncLoop::delete_slice(const std::string& ns, const std::string& name) {
  s_->store.delete_slice(ns, name);
  s_->each([&](IncrementalCompiler& ic) { ic.delete_slice(ns, name); });
}
void SyncLoop::update_node(const Node& x) {
  s_->store.update_node(x);
  s_->each([&](IncrementalCompiler& ic) { ic.update_node(x); });
}
void SyncLoop::delete_node(const std::string& name) {
  s_->store.delete_node(name);
  s_->each([&](IncrementalCompiler& ic) { ic.delete_node(name); });
}

void SyncLoop::update_service_cidr(const ServiceCIDR& x) {
  s_->store.update_service_cidr(x);
  s_->each([&](IncrementalCompiler& ic) { ic.update_service_cidr(x); });
}
void SyncLoop::delete_service_cidr(const std::string& name) {
  s_->store.delete_service_cidr(name);
  s_->each([&](IncrementalCompiler& ic) { ic.delete_service_cidr(name); });
}

void SyncLoop::apply_event(const WatchEvent& e) {
  const bool del = e.type == WatchEvent::Type::Deleted;
  switch (e.kind) {
    case WatchEvent::Kind::Service:
      if (del) delete_service(e.ns, e.name);
      else if (e.service) update_service(*e.service);
      break;
    case WatchEvent::Kind::EndpointSlice:
      if (del) delete_slice(e.ns, e.name);
      else if (e.slice) update_slice(*e.slice);
      break;
    case WatchEvent::Kind::Node:
      if (del) delete_node(e.name);
      else if (e.node) update_node(*e.node);
      break;
    case WatchEvent::Kind::ServiceCIDR:
      if (del) delete_service_cidr(e.name);
      else if (e.service_cidr) update_service_cidr(*e.service_cidr);
      break;
  }
}

void SyncLoop::replace_all(const Snapshot& snap) {
  if (!s_->config_override) {
    s_->store.replace_all(snap);
    s_->each([&](IncrementalCompiler& ic) { ic.replace_all(snap); });
    return;
  }
  Snapshot copy = snap;
  copy.config = *s_->config_override;
  if (s_->env_override) copy.env = *s_->env_override;
  s_->store.replace_all(copy);
  s_->each([&](IncrementalCompiler& ic) { ic.replace_all(copy); });
}

void SyncLoop::set_config(const ProxyConfig& c, const NodeEnvironment* env) {
  s_->config_override = c;
  if (env) s_->env_override = *env;
  s_->store.set_config(c);
  if (env) s_->store.set_environment(*env);
  s_->each([&](IncrementalCompiler& ic) {
    ic.update_config(c);
    if (env) ic.update_environment(*env);
  });
}

int64_t SyncLoop::next_sync_ms() const {
  if (!s_->ever) return s_->clock.now_ms();
  return s_->last_run_ms + (s_->dirty ? s_->opts.min_sync_period_ms : s_->opts.sync_period_ms);
}

std::optional<SyncReport> SyncLoop::tick() {
  int64_t now = s_->clock.now_ms();
  if (now < next_sync_ms()) return std::nullopt;
  return s_->sync(now);
}

SyncReport SyncLoop::sync_now() { return s_->sync(s_->clock.now_ms()); }
bool SyncLoop::pending() const { return s_->dirty; }
Counters SyncLoop::counters() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->counters;
}

std::vector<DriftJob> SyncLoop::take_drift_jobs() {
  std::lock_guard<std::mutex> lock(s_->mu);
  std::vector<DriftJob> jobs;
  for (auto& fs : s_->families)
    if (fs.drift_due && fs.drift_objects && fs.drift_taken_generation != fs.generation) {
      fs.drift_taken_generation = fs.generation;
      jobs.push_back(DriftJob{fs.family, fs.generation, fs.drift_objects, fs.drift_stale, s_->held_text(fs)});
    }
  return jobs;
}

DriftPlan SyncLoop::plan_drift(const DriftJob& job) const { return s_->plan_drift(job); }

static void log_outcome(const SyncLoop::LogFn& log, const DriftOutcome& o, uint64_t generation) {
  if (!log) return;
  log(json{{"msg", "drift check"},
           {"family", o.family == IPFamily::V4 ? "ipv4" : "ipv6"},
           {"result", o.result},
           {"drift_ms", std::round(o.ms * 100) / 100},
           {"path", o.path},
           {"cpu_ms", std::round(o.cpu_ms * 100) / 100},
           {"generation", generation}}
          .dump());
}

DriftOutcome SyncLoop::commit_drift(const DriftJob& job, const DriftPlan& plan) {
  std::lock_guard<std::mutex> lock(s_->mu);
  FamilyState* fs = s_->family_state(job.family);
  if (!fs) return DriftOutcome{job.family, "failed", "", plan.ms, plan.path, plan.cpu_ms};
  ++s_->counters.drift_checks;
  DriftOutcome o = s_->commit_drift_locked(*fs, job, plan);
  if (o.result == "stale") --s_->counters.drift_checks;  // not a check: redone against the newer sync
  log_outcome(s_->log, o, job.generation);
  return o;
}

std::vector<DriftOutcome> SyncLoop::run_drift_checks() {
  std::vector<DriftOutcome> out;
  for (const DriftJob& job : take_drift_jobs()) {
    if (job.stale < s_->opts.drift_max_stale) {
      out.push_back(commit_drift(job, plan_drift(job)));
      continue;
    }
    // Invalidated too often by churn: plan and commit under the lock, against the current
    // generation (syncs wait; this happens only when the unlocked checks kept finding drift).
    std::lock_guard<std::mutex> lock(s_->mu);
    FamilyState* fs = s_->family_state(job.family);
    if (!fs || !fs->drift_due || !fs->drift_objects) continue;
    DriftJob now{fs->family, fs->generation, fs->drift_objects, fs->drift_stale, s_->held_text(*fs)};
    ++s_->counters.drift_checks;
    DriftOutcome o = s_->commit_drift_locked(*fs, now, s_->plan_drift(now));
    log_outcome(s_->log, o, now.generation);
    out.push_back(o);
  }
  return out;
}

void SyncLoop::wait_drift_jobs(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->drift_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    if (s_->drift_wait_stopped) return true;
    for (const auto& fs : s_->families)
      if (fs.drift_due && fs.drift_objects && fs.drift_taken_generation != fs.generation) return true;
    return false;
  });
}

void SyncLoop::stop_drift_waits() {
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->drift_wait_stopped = true;
  s_->drift_cv.notify_all();
}
const LoopOptions& SyncLoop::options() const { return s_->opts; }

}  // namespace kpc::applier
