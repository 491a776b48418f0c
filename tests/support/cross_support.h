// Cross-back-end diffs for tests (header only: the suites that include it link
// kpc::verifier_cross and kpc::verifier_cross_class): a snapshot compiled with the iptables and the nftables back ends, each
// program loaded by its own verifier model and compared by verifier/cross.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "compiler/driver/compile.h"
#include "compiler/driver/compile_nftables.h"
#include "verifier/cross/by_class.h"
#include "verifier/cross/compare.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/state/state.h"
#include "verifier/trace/local_addresses.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {

struct CrossRun {
  verifier::RulesetState ipt;
  verifier::nft::NftState nft;
  std::vector<IPAddr> local;
  std::optional<verifier::cross::CrossResult> result;
  std::string error;  ///< why it could not run ("" when result is set)
};

/// Which engine compares the two programs: representative packets (compare.h, the engine IPVS
/// keeps), or every packet class (by_class.h, what `kpc diff` runs for iptables vs nftables).
enum class CrossEngine { Sampled, PerClass };

/// nft_edit: applied to the nft transaction's text before it is loaded (a deliberately broken
/// program). local: the node's addresses (empty: what the programs name, else a stand-in).
inline std::unique_ptr<CrossRun> cross_diff_snapshot(const Snapshot& snap, IPFamily family,
                                                     const std::function<std::string(std::string)>& nft_edit = {},
                                                     std::vector<IPAddr> local = {}, bool kernel_numgen = false,
                                                     CrossEngine engine = CrossEngine::Sampled) {
  auto run = std::make_unique<CrossRun>();
  DiagSink d1, d2;
  auto ipt = compile_iptables(snap, family == IPFamily::V4 ? Backend::IPTables : Backend::IP6Tables, {}, d1);
  auto nft = compile_nftables(snap, family, {}, d2);
  if (!ipt || !nft) {
    run->error = "does not compile";
    return run;
  }
  run->ipt = verifier::RulesetState::empty(family);
  auto applied = verifier::apply_text(run->ipt, ipt->text, {});
  if (!applied.ok()) {
    run->error = "the iptables program does not apply";
    return run;
  }
  if (!verifier::trace::add_kube_proxy_jumps(run->ipt, &run->error)) return run;
  std::string text = nft_edit ? nft_edit(nft->text) : nft->text;
  auto res = verifier::nft::apply_script(run->nft, text, "compiled.nft");
  if (!res.ok) {
    run->error = "the nft program does not apply";
    return run;
  }
  if (local.empty()) {
    for (const auto& a : verifier::trace::infer_local_addresses(run->ipt)) local.push_back(a.address);
    for (const auto& a : verifier::nft_trace::infer_local_addresses(run->nft, family)) local.push_back(a);
    std::sort(local.begin(), local.end());
    local.erase(std::unique(local.begin(), local.end()), local.end());
    if (local.empty()) local.push_back(*IPAddr::parse(family == IPFamily::V4 ? "192.0.2.254" : "2001:db8::fe"));
  }
  run->local = local;
  auto fa = verifier::cross::make_iptables_frontend(run->ipt, local);
  auto fb = verifier::cross::make_nft_frontend(run->nft, family, local, kernel_numgen);
  if (engine == CrossEngine::PerClass) {
    verifier::cross::ClassSide a, b;
    a.iptables = &run->ipt;
    a.concrete = fa.get();
    b.nft = &run->nft;
    b.concrete = fb.get();
    verifier::cross::ByClassOptions o;
    o.local_addresses = local;
    run->result = verifier::cross::compare_by_class(a, b, family, o);
    return run;
  }
  run->result = verifier::cross::compare(*fa, *fb, verifier::cross::build_space(*fa, *fb, family, local));
  return run;
}

/// The first few surprises, for a failure message.
inline std::string surprises_text(const verifier::cross::CrossResult& r, size_t max = 5) {
  std::string s;
  size_t n = 0;
  for (const auto& c : r.differences) {
    if (!c.known.empty() || n++ >= max) continue;
    s += "  " + c.service + ": " + c.packet.text() + "\n    " + r.backend_a + ": " + c.a.text() + "\n    " +
         r.backend_b + ": " + c.b.text() + "\n";
  }
  return s;
}

}  // namespace kpc::test
