// The incremental compiler: what kube-proxy keeps between syncs, so that a sync after a
// few object changes costs in proportion to the change rather than to the cluster.
//
// It holds the cluster's objects -- Services, EndpointSlices, Nodes, the
// KubeProxyConfiguration and the host facts -- and takes them one at a time, as
// kube-proxy's informers deliver them (add/update/delete). From its last successful sync
// it keeps each Service's ports (proxy::ServicePortInfo) and each port's lowered text
// (iptables::PortFragments). A sync rebuilds the ports and fragments of the Services whose
// Service or EndpointSlices were touched since, decides -- with compile_iptables_from_prior's
// own per-object rules (proxy/change_tracker.h) -- whether it is full or partial and which
// services' chains it writes, and concatenates the kept fragments in kpc's order.
//
// Global state is handled as the batch path handles it: a Node, configuration or host
// change rebuilds everything (and is a full sync when kube-proxy would restart); a flip of
// large-cluster mode (> 1000 endpoints: no endpoint comments) re-lowers every port; stale
// chains are the chains the kernel holds that the new state does not use.
//
// Contract (tests/property/incremental_props_test.cpp): the first sync gives exactly
// compile_iptables(state); every later one gives exactly
// compile_iptables_from_prior(state, state at the last successful sync, options) -- text,
// counters, partial flag and changed services -- with the kernel's chains as below.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/driver/backend.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/compile_nftables.h"

namespace kpc {

struct IncrementalSyncOptions {
  /// A full sync (after a failed restore, forceSyncProxyRules, the periodic full sync).
  bool force_full = false;
  /// Time since stale chains were last deleted; in large-cluster mode kube-proxy deletes
  /// them at most once per iptables.syncPeriod. Unset = long ago (the cleanup runs).
  std::optional<Duration> since_last_cleanup;
  /// The nat chains the kernel has (`iptables-save -t nat`), when the caller knows them. By
  /// default: what this compiler's earlier syncs left there -- the chains the last synced
  /// state uses, plus stale chains a throttled cleanup did not delete.
  std::optional<std::vector<std::string>> existing_nat_chains;
  /// nftables: the time of this sync (ms, the caller's clock), which ages stale chains (kube-proxy
  /// deletes those flushed more than a second before). Unset: 1001 ms after the last sync, as
  /// a kube-proxy syncing at its default minSyncPeriod (1 s) would.
  std::optional<int64_t> now_ms;
  /// nftables, full syncs only: what the kernel's `kube-proxy` table holds (kube-proxy's
  /// readOrReset and chain listing), e.g. when an applier restarts on a node whose table
  /// exists. Unset: as this compiler's earlier syncs left it (none before the first).
  const nftables::KernelListing* nft_listing = nullptr;
};

class IncrementalCompiler {
 public:
  explicit IncrementalCompiler(Backend backend);
  /// Any back end with an incremental path: iptables or nftables, either family.
  explicit IncrementalCompiler(Target target);
  ~IncrementalCompiler();
  IncrementalCompiler(const IncrementalCompiler&) = delete;
  IncrementalCompiler& operator=(const IncrementalCompiler&) = delete;

  // Object events. Objects are the loader's decoded model objects, each valid on its own
  // (the API server validated it); cross-object checks are the caller's.
  void update_service(Service svc);  ///< added or changed
  void delete_service(std::string_view ns, std::string_view name);
  void update_slice(EndpointSlice slice);
  void delete_slice(std::string_view ns, std::string_view name);
  void update_node(Node node);
  void delete_node(std::string_view name);
  void update_config(ProxyConfig config);
  void update_environment(NodeEnvironment env);
  void update_service_cidr(ServiceCIDR cidr);
  void delete_service_cidr(std::string_view name);
  /// The objects of `snapshot` as updates, and deletions of every object it lacks.
  void replace_all(const Snapshot& snapshot);

  /// The program for the current state (see the contract above). nullopt, with the
  /// diagnostics, when no program can be made (e.g. the node has no address of the
  /// family); the state is then kept and the next sync compares with the same prior.
  std::optional<CompileResult> sync(const IncrementalSyncOptions& opts, DiagSink& diags);

  /// The same for an nftables compiler: the transaction of kube-proxy's nftables proxier for
  /// the current state. Contract (tests/property/incremental_props_test.cpp): the first sync
  /// equals compile_nftables; every later one equals the sync that visits every service port
  /// (nftables::sync_nftables over all ports with the same state), though a partial sync
  /// visits only the Services touched since the last one.
  std::optional<NftCompileResult> sync_nft(const IncrementalSyncOptions& opts, DiagSink& diags);

  /// The program of the last sync was not applied (iptables-restore or nft failed and the kernel
  /// rolled back). As kube-proxy does, the next sync is full, and the stale chains that
  /// program deleted are taken to be still there. (Chains it created are not undone: for an
  /// exact stale-chain cleanup after a failure, pass existing_nat_chains read from the
  /// kernel, which is what kube-proxy itself reads.)
  void restore_failed();

  /// Whether a sync succeeded yet (until then, a sync is the first, full one).
  bool has_synced() const;

  /// iptables: the full program of the state as of the last successful sync, put together
  /// from the kept fragments (no lowering): byte for byte what compile_iptables(that state,
  /// backend, {existing_nat_chains}) writes -- the full sync kube-proxy would run now on a
  /// kernel holding those nat chains (the per-service ones among them that no port uses are
  /// deleted). kpc-applier's proof takes its reference program from here (a 10,000-Service
  /// full compile is ~0.7 s; this is the text's assembly). nullopt before the first sync or
  /// for an nftables compiler. Contract: tests/property/incremental_props_test.cpp.
  std::optional<std::string> full_program(const std::vector<std::string_view>& existing_nat_chains) const;

  /// nftables: the full transaction of the state as of the last successful sync as kube-proxy's
  /// first sync on a fresh node writes it -- byte for byte compile_nftables(that state, family,
  /// {keep_state = false}).text -- put together from each Service's kept fragment (its ports'
  /// operations of that transaction, printed; re-lowered only for the Services a sync touched,
  /// all of them after a host change) after setupNFTables' operations. When two Services ensure
  /// the same element key (their operations then depend on each other) it lowers every port
  /// instead. kpc-applier's nftables proof takes its reference from here. nullopt before the
  /// first sync or for an iptables compiler. Contract: tests/property/incremental_nft_props_test.cpp.
  std::optional<std::string> full_nft_program();

  /// full_nft_program's text in the parts it is put together from, in order (their texts
  /// concatenated are that text): setupNFTables' operations, then one part per Service. A part
  /// keeps its id from sync to sync, and its version while its text is unchanged, so that a
  /// caller can tell what changed without reading the rest (kpc-applier's proof reference,
  /// applier/node/nft_want.h). When the text is not put together from fragments (two Services
  /// ensure one element key) it is one part whose version is 0: "changed, always". The views
  /// live until the compiler's next call. nullopt as for full_nft_program.
  struct NftPart {
    uint64_t id = 0, version = 0;
    std::string_view text;
  };
  std::optional<std::vector<NftPart>> full_nft_program_parts();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kpc
