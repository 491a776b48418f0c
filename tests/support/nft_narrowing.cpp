#include "tests/support/nft_narrowing.h"

#include <algorithm>

#include "verifier/nft_trace/tracer.h"

namespace kpc::test {

std::string nft_comparison_facts(const verifier::sem::CompareResult& r) {
  std::string s = "differing " + std::to_string(r.differing_classes) + ", undecided " +
                  std::to_string(r.undecided_classes) + ", sampled " + std::to_string(r.sampled) + "\n";
  auto outcomes = [](const std::vector<verifier::sem::OutcomeShare>& v) {
    std::string o;
    for (const auto& x : v) o += "  " + verifier::sem::format_share(x) + " [" + x.unknown + "]\n";
    return o;
  };
  for (const auto& d : r.differences) {
    s += (d.undecided ? "undecided " : "differs ") + d.cls + " | " + d.witness_text + "\n";
    s += outcomes(d.before) + " ->\n" + outcomes(d.after);
    for (const auto& sv : d.services) s += "  service " + sv + "\n";
    for (const auto& a : d.assumptions) s += "  assumes " + a + "\n";
  }
  for (const auto& f : r.self_check_failures) s += "self-check: " + f + "\n";
  return s;
}

std::vector<IPAddr> nft_diff_locals(const verifier::nft::NftState& a, const verifier::nft::NftState& b) {
  std::vector<IPAddr> out;
  std::vector<std::string> why;
  for (const auto* st : {&a, &b})
    for (IPFamily f : {IPFamily::V4, IPFamily::V6})
      for (const auto& x : verifier::nft_trace::infer_local_addresses(*st, f, &why))
        if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  if (out.empty()) out = {*IPAddr::parse("192.168.0.10"), *IPAddr::parse("2001:db8::10")};
  return out;
}

}  // namespace kpc::test
