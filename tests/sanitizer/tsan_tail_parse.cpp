// ThreadSanitizer driver for the one place kpc runs two threads on shared data:
// apply_text with its tail parser (verifier/state/tail_parse.*) forced on, split at every
// 5 %, both flavours, on a 6,000-line program and on the same program with a bad line
// early (the main pass stops and cancels the worker). scripts/tsan.sh builds it with
// clang -fsanitize=thread and runs it; any report fails the script. Not part of CI:
// TSan cannot share the asan preset's build, and the build is the cost.
#include <cstdio>
#include <string>
#include "verifier/state/state.h"
using namespace kpc::verifier;
int main() {
  std::string prog = "*filter\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -m comment --comment \"x y\" -j ACCEPT\nCOMMIT\n*nat\n";
  for (int i = 0; i < 3000; ++i) prog += ":KUBE-SVC-" + std::to_string(i) + " - [0:0]\n";
  for (int i = 0; i < 3000; ++i)
    prog += "-A KUBE-SVC-" + std::to_string(i) + " -m comment --comment \"ns/svc" + std::to_string(i) +
            ":p80 -> 10.0.0.1:80\" -m tcp -p tcp -d 10.96.0." + std::to_string(i % 250) + "/32 --dport 80 -j KUBE-SVC-" +
            std::to_string((i + 1) % 3000) + "\n";
  prog += "COMMIT\n";
  size_t fails = 0;
  std::string bad = prog;
  bad.insert(bad.find("*nat\n") + 5, ":A - [0:0]\n-A A -m nosuchmatch -j ACCEPT\n");
  for (const std::string* text : {&prog, &bad})
  for (Flavor f : {Flavor::Legacy, Flavor::Nft})
    for (unsigned pct = 0; pct <= 100; pct += 5) {
      RulesetState st = RulesetState::empty(kpc::IPFamily::V4);
      ApplyOptions o;
      o.noflush = true;
      o.flavor = f;
      o.parallel_parse_min_bytes = 0;
      o.parallel_parse_split_percent = pct;
      auto r = apply_text(st, *text, o);
      fails += !r.ok();
    }
  // 21 splits x 2 flavours of the bad program fail; the good one never does.
  std::printf("%zu applies failed (42 expected)\n", fails);
  return fails == 42 ? 0 : 1;
}
