#include "tests/support/iptables_pairs.h"

#include <rapidcheck.h>

#include "compiler/driver/compile.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {

std::optional<verifier::RulesetState> load_iptables_program(const std::string& text, IPFamily family) {
  verifier::RulesetState st = verifier::RulesetState::empty(family);
  verifier::ParseError pe;
  if (!verifier::apply_text(st, text, verifier::ApplyOptions{true, verifier::Flavor::Legacy}, &pe).ok()) return {};
  if (!verifier::trace::add_kube_proxy_jumps(st)) return {};
  return st;
}

std::vector<IptablesPair> random_iptables_pairs(int flip_masquerade_all_one_in) {
  testgen::GenOptions go;
  go.max_services = 6;
  testgen::GeneratedCluster a = make_compilable(*testgen::gen_cluster(go));
  testgen::GeneratedCluster b = a;
  int serial = 0;
  for (int m = *rc::gen::inRange(1, 5); m > 0; --m) mutate_cluster(b, ++serial);
  auto sa = load_compilable(a), sb = load_compilable(b);
  RC_PRE(sa.has_value() && sb.has_value());
  if (flip_masquerade_all_one_in > 0 && *rc::gen::inRange(0, flip_masquerade_all_one_in) == 0) {
    sb = sa;
    sb->config.iptables.masquerade_all = !sa->config.iptables.masquerade_all;
  }
  std::vector<IptablesPair> out;
  for (Backend be : {Backend::IPTables, Backend::IP6Tables}) {
    DiagSink d1, d2;
    auto pa = compile_iptables(*sa, be, {}, d1), pb = compile_iptables(*sb, be, {}, d2);
    if (!pa || !pb) continue;
    IPFamily f = backend_family(be);
    auto ra = load_iptables_program(pa->text, f), rb = load_iptables_program(pb->text, f);
    RC_ASSERT(ra.has_value() && rb.has_value());
    IptablesPair p{std::move(*ra), std::move(*rb), {}};
    for (const auto* s : {&*sa, &*sb})
      for (const auto& n : s->nodes)
        for (const auto& ad : n.addresses)
          if (auto ip = IPAddr::parse(ad.address); ip && ip->family == f) p.local.push_back(*ip);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kpc::test
