// The real dataplane: the node's own tools, run as kube-proxy runs them.
//  iptables: `iptables-restore --noflush -w` (stdin), `iptables-save`, `iptables -w -C/-I`
//            for the jump rules; legacy or nft flavour (--iptables=legacy|nft|auto).
//  nftables: `nft -f -`, `nft list table ip|ip6 kube-proxy`; or, with ApplyWith::InProcess,
//            applies as a netlink batch built in-process (nft_netlink.h: no fork/exec and no
//            cache fetch), falling back to libnftables (nft_library.h) for what that encoder
//            does not cover and for nft's error text; reads through libnftables.
//  iptables is applied with the tools either way: see docs/applier.md "In-process apply" for
//  the measurement that decided against libiptc.
// Programs only ever name kube-proxy's chains and tables, so foreign rules are untouched.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "applier/node/dataplane.h"

namespace kpc::applier {

enum class IptablesFlavorChoice { Legacy, Nft, Auto };
std::optional<IptablesFlavorChoice> parse_flavor_choice(std::string_view s);

/// `--apply-with`: the node's tools (kube-proxy's behaviour), or the libraries they are built
/// on, in the applier's process, where that pays (nftables: libnftables).
enum class ApplyWith { Tools, InProcess };
std::optional<ApplyWith> parse_apply_with(std::string_view s);

/// iptables-wrapper's decision, as kpc-applier takes it: the flavour whose tables hold more
/// kube-proxy/kubelet chains (KUBE-*, both families); nft when there are none, or a tie.
/// Counts come from the `-save` tools; a missing tool counts 0.
verifier::Flavor detect_flavor(size_t* legacy_chains = nullptr, size_t* nft_chains = nullptr);
/// Counts `:KUBE-` chain lines in save output.
size_t count_kube_chains(const std::string& save_text);

struct KernelTools {
  verifier::Flavor flavor = verifier::Flavor::Nft;
  /// Overrides of the restore binaries (tests: a wrapper that fails on demand); "" = the
  /// flavour's own (iptables-legacy-restore, ip6tables-nft-restore, ...).
  std::string iptables_restore, ip6tables_restore;
  std::string nft = "nft";
  /// xtables lock wait: `-w` (kube-proxy waits, 5 s by default with -W).
  bool wait = true;
  /// nftables applies as netlink batches (and libnftables), reads through libnftables, instead
  /// of the `nft` binary (which is then not run at all, so `nft` above is ignored).
  ApplyWith apply_with = ApplyWith::Tools;
  /// Where a fallback from the netlink batch to libnftables is logged (a JSON line); unset:
  /// stderr, as kpc-applier logs.
  std::function<void(const std::string&)> log;
};

/// How in-process nftables applies went (ApplyWith::InProcess).
struct InProcessCounts {
  std::atomic<size_t> netlink_applied{0};
  std::atomic<size_t> unsupported{0};      ///< handed to libnftables (outside the encoder's vocabulary)
  std::atomic<size_t> refused{0};          ///< the kernel refused the batch (then libnftables, for nft's error)
  std::atomic<size_t> encoder_bugs{0};     ///< refused as a batch, yet libnftables applied it
};

/// The binary of a flavour and family: tool is "restore", "save" or "" (iptables itself).
std::string iptables_binary(verifier::Flavor flavor, IPFamily family, const std::string& tool);

class KernelDataplane final : public Dataplane {
 public:
  explicit KernelDataplane(KernelTools tools) : t_(std::move(tools)) {}
  verifier::Flavor flavor() const override { return t_.flavor; }
  DataplaneResult read(BackendKind kind, IPFamily family, std::string* out) override;
  DataplaneResult apply(BackendKind kind, IPFamily family, const std::string& program) override;
  DataplaneResult ensure_jumps(IPFamily family, const ChainSet& targets, size_t* inserted) override;
  /// `nfacct get NAME` || `nfacct add NAME`.
  DataplaneResult ensure_nfacct(const std::vector<std::string>& names) override;
  const InProcessCounts& in_process_counts() const { return counts_; }

 private:
  DataplaneResult apply_nft_in_process(const std::string& program);
  void log(const std::string& line) const;
  KernelTools t_;
  InProcessCounts counts_;
};

/// Splits a rule's arguments as a shell would for iptables (double quotes group; no
/// expansion): `-m comment --comment "a b" -j X` -> {-m, comment, --comment, a b, -j, X}.
std::vector<std::string> split_rule_args(std::string_view rule);

}  // namespace kpc::applier
