// libFuzzer target: any bytes as the node's IPVS state for `kpc compile --backend ipvs
// --prior-state` (issue 17 §2), read by the verifier's ipvsadm reader (verifier/ipvs): as
// `ipvsadm -S -n` output, as an `ipvsadm -R` script applied to what was read, and as
// `ipvsadm -Ln` counts. Read or refused with a located error; never a crash, hang or
// sanitizer report, and a refusal always names a line.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "verifier/ipvs/ipvsadm.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kpc::verifier::ipvs;
  if (size > 64 * 1024) return -1;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto located = [](const std::string& e) {
    if (e.empty() || e[0] < '1' || e[0] > '9' || e.find(": ") == std::string::npos) std::abort();
  };
  Table t;
  std::string err;
  if (!parse_save(text, &t, &err)) located(err);
  Table saved = t;
  if (!apply_script(text, &t, &err)) located(err);
  if (!read_counts(text, &saved, &err)) located(err);
  for (const auto& [key, vs] : saved.services)
    for (const auto& rs : vs.real_servers) (void)rs.connections();
  return 0;
}
