#include "tools/kpc/trace_expect.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "tools/kpc/commands.h"

namespace kpc::cli {

int check_expectations(const TraceExpectations& want, const std::vector<OutcomeFacts>& outcomes) {
  if (!want.any()) return kExitOk;
  std::vector<std::string> failed;
  std::set<std::string> dnats;
  for (const auto& oc : outcomes) {
    if (oc.unknown) failed.push_back("an outcome is unknown: " + oc.unknown_reason);
    if (oc.dnat) dnats.insert(*oc.dnat);
    if (!want.verdict.empty() && oc.verdict != want.verdict)
      failed.push_back("verdict " + oc.verdict + " (p = " + oc.probability + "), expected " + want.verdict);
    if (!want.masquerade.empty() && oc.masquerade != (want.masquerade == "yes"))
      failed.push_back(std::string("masquerade ") + (oc.masquerade ? "yes" : "no") + " (p = " + oc.probability +
                       "), expected " + want.masquerade);
  }
  if (!want.dnat.empty()) {
    std::set<std::string> expected(want.dnat.begin(), want.dnat.end());
    if (expected != dnats) {
      std::string got;
      for (const auto& d : dnats) got += " " + d;
      failed.push_back("DNAT destinations" + (got.empty() ? std::string(" none") : got) + ", expected the set of " +
                       std::to_string(expected.size()) + " given");
    }
  }
  std::sort(failed.begin(), failed.end());
  failed.erase(std::unique(failed.begin(), failed.end()), failed.end());
  for (const auto& f : failed) std::fprintf(stderr, "kpc trace: expectation not met: %s\n", f.c_str());
  return failed.empty() ? kExitOk : kExitDifferent;
}

bool parse_u32(const std::string& s, uint32_t* v) {
  if (s.empty()) return false;
  try {
    size_t used = 0;
    unsigned long long x = std::stoull(s, &used, 0);
    if (used != s.size() || x > 0xffffffffull) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  } catch (...) {
    return false;
  }
}

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

}  // namespace kpc::cli
