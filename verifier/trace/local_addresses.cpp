#include "verifier/trace/local_addresses.h"

#include <algorithm>
#include <map>

#include "verifier/parse/parser.h"

namespace kpc::verifier::trace {

std::vector<InferredAddress> infer_local_addresses(const RulesetState& st) {
  std::map<IPAddr, std::string> found;
  auto note = [&](const IPAddr& a, const std::string& why) {
    if (a.family == st.family) found.emplace(a, why);
  };
  for (ir::TableId tid : {ir::TableId::Nat}) {
    for (const Chain& chain : st.table(tid).chains) {
      for (uint32_t id : chain.rules) {
        std::string_view text = st.store->text(id);
        bool nodeports = chain.name == "KUBE-SERVICES" && text.find("-j KUBE-NODEPORTS") != std::string_view::npos;
        bool snat = text.find("-j SNAT") != std::string_view::npos;
        if (!nodeports && !snat) continue;
        auto rule = parse_rule_text("-A " + std::string(chain.name) + std::string(text), st.family);
        if (!rule) continue;
        if (nodeports) {
          for (const auto& a : rule->args)
            if (a.kind == ir::ArgKind::Dst && !a.neg && a.cidr.is_host())
              note(a.cidr.addr, "nat KUBE-SERVICES sends NodePorts to it (kube-proxy's nodePortAddresses)");
        }
        if (snat && rule->target.kind == ir::TargetKind::SNAT && rule->target.to_addr)
          note(*rule->target.to_addr, "the source address of -j SNAT --to-source in nat " + std::string(chain.name));
      }
    }
  }
  std::vector<InferredAddress> out;
  for (auto& [a, why] : found) out.push_back({a, why});
  return out;
}

}  // namespace kpc::verifier::trace
