// libFuzzer target: any bytes as an nft script (`nft -f`) or an `nft list ruleset` listing,
// read by the nft model (verifier/nft). Applied to an empty node and to kube-proxy's base
// ruleset; whatever applies must print as a listing that reads back to the same state, and
// a failed script must leave the state as it was; its parse taken from the base ruleset's
// (prepare_script_like) must give what its own parse gives, and so must its application to
// an empty node while it is parsed in parts (apply_while_parsing). Never a crash, hang or
// sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "verifier/nft/nft.h"

namespace {

namespace nft = kpc::verifier::nft;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "\n==kpc-fuzz== CHECK FAILED: %s\n%.4000s\n", what, detail.c_str());
  std::abort();
}

const char* kBase =
    "add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\n"
    "add set ip kube-proxy cluster-ips { type ipv4_addr ; comment \"Active ClusterIPs\" ; }\n"
    "add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }\n"
    "add chain ip kube-proxy services\nadd chain ip kube-proxy mark-for-masquerade\n"
    "add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }\n"
    "add rule ip kube-proxy nat-prerouting jump services\n"
    "add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips\n"
    "add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000\n";

void check(nft::NftState& s, std::string_view text) {
  const std::string before = nft::print_ruleset(s, {true});
  nft::ApplyResult r = nft::apply_script(s, text, "fuzz.nft");
  for (const auto& e : r.errors) (void)e.render();
  if (!r.ok) {
    if (nft::print_ruleset(s, {true}) != before) fail("a failed script changed the state", std::string(text));
    return;
  }
  const std::string listed = nft::print_ruleset(s, {true});
  for (const auto& t : s.tables) (void)nft::print_knftables_dump(s, t.family, t.name);
  if (s.empty()) return;
  nft::NftState back;
  nft::NftError err;
  if (!nft::parse_listing(listed, "listing", &back, &err)) fail("a listing does not read back", listed + "\n" + err.render());
  if (nft::print_ruleset(back, {true}) != listed) fail("a listing reads back differently", listed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return -1;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  nft::NftState empty;
  check(empty, text);
  nft::NftState base;
  if (!nft::apply_script(base, kBase, "base.nft").ok) fail("the base state does not apply", kBase);
  check(base, text);
  // The parse taken from another script's (prepare_script_like: kpc verify's full from its
  // prior): the same outcome, errors and state as the script's own parse.
  {
    nft::NftState own, like;
    if (!nft::apply_script(own, kBase, "base.nft").ok || !nft::apply_script(like, kBase, "base.nft").ok)
      fail("the base state does not apply", kBase);
    const nft::ApplyResult ro = nft::apply_script(own, text, "fuzz.nft");
    const nft::ApplyResult rl =
        nft::apply_prepared(like, nft::prepare_script_like(text, nft::prepare_script(kBase), kBase), text, "fuzz.nft");
    auto outcome = [](const nft::ApplyResult& r, const nft::NftState& s) {
      std::string o = r.ok ? "ok\n" : "failed\n";
      for (const auto& e : r.errors) o += e.render();
      return o + nft::print_ruleset(s, {true});
    };
    if (outcome(ro, own) != outcome(rl, like))
      fail("a parse taken from another script's differs", std::string(text) + "\n---\n" + outcome(ro, own) + "\n---\n" + outcome(rl, like));
    // Applied to an empty node while parsed in three parts (kpc verify's prior).
    nft::NftState usual, streamed;
    const nft::ApplyResult ru = nft::apply_script(usual, text, "fuzz.nft");
    const nft::ApplyResult rs = nft::apply_while_parsing(streamed, text, "fuzz.nft", [](const nft::PreparedScript&) {}, 0, 3);
    if (outcome(ru, usual) + std::to_string(ru.rules_kept) != outcome(rs, streamed) + std::to_string(rs.rules_kept))
      fail("an application while parsed differs", std::string(text) + "\n---\n" + outcome(ru, usual) + "\n---\n" + outcome(rs, streamed));
  }
  nft::NftState listed;
  nft::NftError err;
  if (nft::looks_like_listing(text) && nft::parse_listing(text, "fuzz.nft", &listed, &err))
    (void)nft::print_ruleset(listed, {true});
  return 0;
}
