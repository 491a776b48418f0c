// ThreadSanitizer driver for the nft model's threads: a prior applied while it is parsed
// (apply_while_parsing: parts parsed on two threads, the parse handed to a second thread's
// callback that builds another script's parse from it), graph caches built on a second
// thread (graph_build_aside_min 0), the jump graph collected in two halves, and a script
// applied to a state while a copy of it is made and handed to another thread
// (apply_prepared_forking). A kube-proxy-like program of 3,000 services, cut into 2 to 16
// parts, clean and with a bad line early (the stream stops and the whole is applied again).
// scripts/tsan.sh builds it with clang -fsanitize=thread and runs it; any report fails.
#include <cstdio>
#include <string>

#include "verifier/nft/internal.h"
#include "verifier/nft/nft.h"

using namespace kpc::verifier::nft;

int main() {
  detail::graph_build_aside_min = 0;
  // (every chain flushed before its rules, as kube-proxy writes a full transaction)
  std::string prior = "add table ip kube-proxy\n"
                      "add chain ip kube-proxy services\n"
                      "flush chain ip kube-proxy services\n"
                      "add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }\n"
                      "flush chain ip kube-proxy nat-prerouting\n"
                      "add rule ip kube-proxy nat-prerouting jump services\n"
                      "add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }\n"
                      "add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips\n";
  for (int i = 0; i < 3000; ++i) {
    const std::string svc = "service-" + std::to_string(i), ep = "endpoint-" + std::to_string(i);
    prior += "add chain ip kube-proxy " + ep + "\nflush chain ip kube-proxy " + ep + "\n";
    prior += "add rule ip kube-proxy " + ep + " meta l4proto tcp dnat to 10.1." + std::to_string(i / 250) + "." +
             std::to_string(i % 250) + ":80\n";
    prior += "add chain ip kube-proxy " + svc + "\nflush chain ip kube-proxy " + svc + "\n";
    prior += "add rule ip kube-proxy " + svc + " numgen random mod 1 vmap { 0 : goto " + ep + " }\n";
    prior += "add element ip kube-proxy service-ips { 172.30." + std::to_string(i / 250) + "." + std::to_string(i % 250) +
             " . tcp . 80 : goto " + svc + " }\n";
  }
  std::string bad = prior;
  bad.insert(bad.find("add chain ip kube-proxy service-1\n"), "add rule ip kube-proxy no-such-chain accept\n");
  // The partial drops the first service's element; the full is the prior without it, and
  // its deletion (a full transaction for a node that holds the prior).
  const std::string partial = "delete element ip kube-proxy service-ips { 172.30.0.0 . tcp . 80 }\n";
  std::string full = prior;
  const size_t at = full.find("add element ip kube-proxy service-ips { 172.30.0.0 ");
  full.erase(at, full.find('\n', at) + 1 - at);
  full += partial;
  size_t fails = 0, streamed_runs = 0;
  for (const std::string* text : {&prior, &bad})
    for (size_t parts = 2; parts <= 16; parts += 7) {
      NftState s;
      PreparedScript pf;
      bool streamed = false;
      auto r = apply_while_parsing(
          s, *text, "prior.nft", [&](const PreparedScript& parse) { pf = prepare_script_like(full, parse, *text); }, 0,
          parts, &streamed);
      streamed_runs += streamed;
      if (!r.ok) {
        ++fails;
        continue;
      }
      NftState a;
      ApplyResult ra;
      auto rb = apply_prepared_forking(s, std::move(pf), full, "full.nft", [&](NftState& copy) {
        a = std::move(copy);
        ra = apply_script(a, partial, "partial.nft");
      });
      if (!ra.ok || !rb.ok || print_ruleset(a) != print_ruleset(s)) ++fails;
    }
  // The bad program fails at every cut (3); the good one applies, streamed, and its partial
  // and full agree.
  std::printf("%zu runs failed (3 expected), %zu streamed (3 expected)\n", fails, streamed_runs);
  return fails == 3 && streamed_runs == 3 ? 0 : 1;
}
