// libFuzzer target: any bytes as `ipset save` output (kpc's --ipsets), read by the
// verifier's ipset model (verifier/ipset). Whatever parses, membership of a few packets
// of either family is decided or reported unknown; never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "verifier/ipset/ipset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kpc::verifier::ipset;
  if (size > 64 * 1024) return -1;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Table t;
  std::string err;
  if (!parse_save(text, &t, &err)) return 0;
  for (const auto& [name, set] : t.sets) {
    for (const char* flags : {"src", "dst,dst", "src,dst,src", "dst,src,dst,src"}) {
      for (uint8_t proto : {6, 17, 1}) {
        PacketFields p{0x0a000001, 0x0a000002, kpc::IPFamily::V4, proto, 80, 443};
        std::string why;
        (void)match(t, name, flags, p, &why);
        p.family = kpc::IPFamily::V6;
        p.sport.reset();
        (void)match(t, name, flags, p, &why);
      }
    }
    (void)reached(t, name);
  }
  return 0;
}
