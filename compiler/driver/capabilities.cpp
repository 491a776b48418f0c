#include "compiler/driver/capabilities.h"

#include <algorithm>

namespace kpc {

namespace {

constexpr Support W = Support::Works;
constexpr Support S = Support::Sampled;
constexpr Support R = Support::Refused;

// The pod source and destinations of the examples: shop/cart (10.96.30.30:9000) from a pod on
// node-a; shop/web's IPv6 cluster IP.
#define POD_V4 " --src 10.244.1.50 --dst 10.96.30.30 --dport 9000 --from pod"
#define POD_V6 " --src fd00:10:244:1::50 --dst fd00:10:96::a --dport 80 --from pod"

const char* const kSnapshotsOnly =
    "reads cluster snapshots (YAML/JSON); a program or node state is read by kpc simulate (what it leaves), "
    "kpc trace (a packet through it) or kpc diff (against another)";
const char* const kProgramsOnly =
    "applies programs to a state; a snapshot is compiled first: kpc compile SNAPSHOT | kpc simulate -";
const char* const kNoIpvsState =
    "the kernel's IPVS table is not a program kpc applies: kpc trace DIR follows packets through an IPVS program "
    "set, kpc compile --backend ipvs --prior-state NODE_DIR writes the change a sync makes";
const char* const kNoIpvsVerify =
    "kube-proxy's IPVS proxier writes no partial restore to prove (each sync states its whole IPVS table): kpc "
    "compile --backend ipvs --prior-state NODE_DIR gives the change a sync makes, kpc diff OLD NEW compares two syncs";
const char* const kNoFastpathVerify =
    "the fast-path table is rewritten whole at each sync (no partial to prove): kpc golden or kpc diff compare it";
const char* const kNoIpvsDrift =
    "an IPVS node's state is four dumps (ipvsadm -S -n, ipvsadm -Ln, ipset save, iptables-save): kpc compile "
    "--backend ipvs --prior-state NODE_DIR -o DIR writes what repairs it; kpc drift --backend iptables checks its "
    "companion iptables rules";
const char* const kNoIpvsGolden =
    "IPVS mode is four files, not one program (ipvs.rules, ipset.rules, iptables.rules, node.plan): kpc compile "
    "--backend ipvs -o DIR writes them for a byte comparison, and kpc diff DIR_OLD DIR_NEW compares two by sample";
const char* const kNoFastpathDrift =
    "the fast-path table holds no Service behaviour to check: kpc golden compares the compiled table with a file";

}  // namespace

const std::vector<Capability>& capabilities() {
  static const std::vector<Capability> cells = {
      // validate
      {"validate", "any", kSnapshotDir, W, "loads and validates the snapshot (located diagnostics)", "validate {ex}", 0, "valid"},
      {"validate", "any", kSnapshotFile, W, "the same, one file", "validate {ex-file}", 0, "valid"},
      {"validate", "any", kStdin, W, "the same, from standard input", "validate - <{ex-file}", 0, "valid"},
      {"validate", "any", kProgram, R, kSnapshotsOnly, "validate {ipt}", 2, "E0704"},
      {"validate", "any", kNodeState, R, kSnapshotsOnly, "validate {nft-list}", 2, "E0704"},
      // compile
      {"compile", "iptables", kSnapshotDir, W, "kube-proxy's iptables-restore program", "compile {ex}", 0, "*nat"},
      {"compile", "iptables", kSnapshotFile, W, "the same, one file", "compile {ex-file}", 0, "*nat"},
      {"compile", "iptables", kStdin, W, "the same, from standard input", "compile - <{ex-file}", 0, "*nat"},
      {"compile", "iptables", kNodeState, W, "the smallest program that repairs the node (--prior-state)",
       "compile {ex} --prior-state {ipt-save}", 0, ""},
      {"compile", "ip6tables", kSnapshotDir, W, "the IPv6 program", "compile {ex} --backend ip6tables", 0, "fd00:10:96::a"},
      {"compile", "nftables", kSnapshotDir, W, "kube-proxy's nftables transaction (nft -f input)", "compile {ex-nft}", 0,
       "add table ip kube-proxy"},
      {"compile", "nftables", kStdin, W, "the same, from standard input", "compile - --backend nftables <{ex-file}", 0,
       "add table ip kube-proxy"},
      {"compile", "nftables", kNodeState, W, "the smallest transaction that repairs the node (--prior-state)",
       "compile {ex-nft} --prior-state {nft-list}", 0, ""},
      {"compile", "nftables (IPv6)", kSnapshotDir, W, "the IPv6 transaction", "compile {ex-nft} --family ipv6", 0,
       "add table ip6 kube-proxy"},
      {"compile", "fastpath", kSnapshotDir, W, "KEP-4963's inet kube-proxy-fastpath table", "compile {ex} --backend fastpath",
       0, "kube-proxy-fastpath"},
      {"compile", "ipvs", kSnapshotDir, W, "ipvs.rules, ipset.rules, iptables.rules and node.plan in -o DIR",
       "compile {ex-ipvs} -o {out}/ipvs", 0, ""},
      {"compile", "ipvs", kNodeState, W, "the change a sync makes on the node, with graceful termination",
       "compile {ex-ipvs} --prior-state {ipvs-node} -o {out}/ipvs-sync", 0, ""},
      {"compile", "any", kProgram, R, kSnapshotsOnly, "compile {ipt}", 2, "E0704"},
      // simulate
      {"simulate", "iptables", kProgram, W, "the state iptables-restore leaves, as iptables-save prints it",
       "simulate --noflush {ipt}", 0, "*nat"},
      {"simulate", "iptables", kNodeState, W, "the state (with programs: applied on it)", "simulate --state {ipt-save}", 0,
       "*nat"},
      {"simulate", "iptables", kStdin, W, "a program from standard input", "simulate --noflush - <{ipt}", 0, "*nat"},
      {"simulate", "ip6tables", kProgram, W, "the same for ip6tables-restore", "simulate --backend ip6tables {ipt6}", 0,
       "*nat"},
      {"simulate", "nftables", kProgram, W, "the state nft -f leaves, as nft list ruleset prints it", "simulate {nft}", 0,
       "table ip kube-proxy"},
      {"simulate", "nftables", kNodeState, W, "the state (with transactions: applied on it)", "simulate --state {nft-list}",
       0, "table ip kube-proxy"},
      {"simulate", "nftables", kStdin, W, "a transaction from standard input", "simulate - <{nft}", 0, "table ip kube-proxy"},
      {"simulate", "nftables (IPv6)", kProgram, W, "the IPv6 transaction", "simulate {nft6}", 0, "table ip6 kube-proxy"},
      {"simulate", "fastpath", kProgram, W, "the fast-path table's transaction, applied by the nft model",
       "simulate {fastpath}", 0, "kube-proxy-fastpath"},
      {"simulate", "ipvs", kProgram, R, kNoIpvsState, "simulate {ipvs-dir}", 2, "E0704"},
      {"simulate", "any", kSnapshotDir, R, kProgramsOnly, "simulate {ex}", 2, "E0704"},
      // verify
      {"verify", "iptables", kSnapshotDir, W, "prior ⊕ partial ≡ full: kpc compiles the three programs",
       "verify {new} --prior {ex}", 0, "identical"},
      {"verify", "iptables", kProgram, W, "the three programs given", "verify --state {ipt-save} --partial {empty} --full {ipt}",
       0, "identical"},
      {"verify", "iptables", kStdin, W, "a program from standard input (an empty partial: a sync with nothing to do)",
       "verify --state {ipt-save} --partial - --full {ipt} <{empty}", 0, "identical"},
      {"verify", "ip6tables", kSnapshotDir, W, "the IPv6 programs", "verify {new} --prior {ex} --backend ip6tables", 0,
       "identical"},
      {"verify", "nftables", kSnapshotDir, W, "the three transactions, every family the node runs",
       "verify {new-nft} --prior {ex-nft}", 0, "identical"},
      {"verify", "nftables", kNodeState, W, "a listing as the prior state",
       "verify --state {nft-list} --partial {empty} --full {nft} --allow-equivalent", 0, "verdict: equivalent"},
      {"verify", "nftables", kStdin, W, "a transaction from standard input",
       "verify --state {nft-list} --partial - --full {nft} --allow-equivalent <{empty}", 0, "verdict: equivalent"},
      {"verify", "fastpath", kSnapshotDir, R, kNoFastpathVerify, "verify {new} --prior {ex} --backend fastpath", 2, "E0704"},
      {"verify", "ipvs", kSnapshotDir, R, kNoIpvsVerify, "verify {new-ipvs} --prior {ex-ipvs}", 2, "E0704"},
      // diff
      {"diff", "iptables", kSnapshotDir, W, "packet classes whose outcome changes, by Service, with witnesses",
       "diff {ex} {new}", 1, "packet classes behave differently"},
      {"diff", "iptables", kSnapshotFile, W, "the same, one file a side", "diff {ex-file} {new}", 1,
       "packet classes behave differently"},
      {"diff", "iptables", kProgram, W, "two programs", "diff {ipt} {ipt-new}", 1, "packet classes behave differently"},
      {"diff", "iptables", kNodeState, W, "a node's iptables-save against a program", "diff {ipt-save} {ipt-new}", 1,
       "packet classes behave differently"},
      {"diff", "iptables", kStdin, W, "a side from standard input", "diff {ipt} - <{ipt-new}", 1,
       "packet classes behave differently"},
      {"diff", "ip6tables", kSnapshotDir, W, "the IPv6 programs", "diff {ex} {new} --backend ip6tables", 1,
       "packet classes behave differently"},
      {"diff", "nftables", kSnapshotDir, W, "the same comparison on the nft model, every family the node runs",
       "diff {ex-nft} {new-nft}", 1, "packet classes behave differently"},
      {"diff", "nftables", kProgram, W, "two transactions", "diff {nft} {nft-new}", 1, "packet classes behave differently"},
      {"diff", "nftables", kNodeState, W, "a node's nft listing against a transaction", "diff {nft-list} {nft-new}", 1,
       "packet classes behave differently"},
      {"diff", "nftables", kStdin, W, "a side from standard input", "diff {nft} - <{nft-new}", 1,
       "packet classes behave differently"},
      {"diff", "ipvs", kSnapshotDir, S,
       "two IPVS syncs through the concrete tracer: first packets of representative flows, not a per-class proof",
       "diff {ex-ipvs} {new-ipvs}", 1, "not a per-class proof"},
      {"diff", "ipvs", kProgram, S, "two IPVS program sets (kpc compile --backend ipvs -o DIR), by sample",
       "diff {ipvs-dir} {ipvs-dir-new}", 1, "not a per-class proof"},
      {"diff", "iptables → nftables", kSnapshotDir, W,
       "across modes, per packet class: every class of both programs compared, each difference named by kube-proxy's "
       "documented mode differences (counted apart) or reported; every family (above 20,000 rules a side by "
       "sample unless --cross-engine per-class, said on the coverage line)",
       "diff {ex} --from-backend iptables --to-backend nftables", 0, "every packet class (a per-class proof)"},
      {"diff", "iptables → nftables", kProgram, W,
       "an iptables program against an nft transaction, per packet class, each difference classified",
       "diff {ipt} {nft}", 0, "every packet class (a per-class proof)"},
      {"diff", "ipvs → nftables", kSnapshotDir, S, "IPVS mode against nftables mode, first packets, by sample",
       "diff {ex} --from-backend ipvs --to-backend nftables", 1, "kpc diff across modes"},
      // drift
      {"drift", "iptables", kNodeState, W,
       "kube-proxy's chains and jumps on the node against a full sync; by Service; the repair (-o)",
       "drift {ex} --state {ipt-save}", 1, "jump rules missing"},
      {"drift", "iptables", kStdin, W, "the node's state from standard input", "drift {ex} --state - <{ipt-save}", 1,
       "jump rules missing"},
      {"drift", "ip6tables", kNodeState, W, "the IPv6 rules", "drift {ex} --state {ipt6-save} --backend ip6tables", 1,
       "jump rules missing"},
      {"drift", "nftables", kNodeState, W,
       "the node's kube-proxy tables (others ignored) against a full sync; by Service; the repair (-o)",
       "drift {new-nft} --state {nft-list}", 1, "verdict: drift"},
      {"drift", "nftables", kStdin, W, "the node's listing from standard input", "drift {ex-nft} --state - <{nft-list}", 0,
       "verdict: no drift"},
      {"drift", "fastpath", kNodeState, R, kNoFastpathDrift, "drift {ex} --state {nft-list} --backend fastpath", 2, "E0704"},
      {"drift", "ipvs", kNodeState, R, kNoIpvsDrift, "drift {ex-ipvs} --state {ipvs-node}", 2, "E0704"},
      // trace
      {"trace", "iptables", kSnapshotDir, W, "one packet through the compiled program, exact probabilities",
       "trace {ex}" POD_V4, 0, "10.244.1.30:9000"},
      {"trace", "iptables", kProgram, W, "one packet through a program", "trace {ipt}" POD_V4, 0, "10.244.1.30:9000"},
      {"trace", "iptables", kNodeState, W, "one packet through a node's iptables-save", "trace {ipt-save}" POD_V4, 0, "10.244.1.30:9000"},
      {"trace", "iptables", kStdin, W, "a program from standard input", "trace -" POD_V4 " <{ipt}", 0, "10.244.1.30:9000"},
      {"trace", "ip6tables", kProgram, W, "the IPv6 program", "trace {ipt6} --backend ip6tables" POD_V6, 0, "fd00:10:244:1::5]:8080"},
      {"trace", "nftables", kSnapshotDir, W, "one packet through the compiled transaction", "trace {ex-nft}" POD_V4, 0,
       "10.244.1.30:9000"},
      {"trace", "nftables", kProgram, W, "one packet through a transaction", "trace {nft}" POD_V4, 0, "10.244.1.30:9000"},
      {"trace", "nftables", kNodeState, W, "one packet through an nft listing", "trace {nft-list}" POD_V4, 0, "10.244.1.30:9000"},
      {"trace", "nftables", kStdin, W, "a transaction from standard input", "trace -" POD_V4 " <{nft}", 0, "10.244.1.30:9000"},
      {"trace", "nftables (IPv6)", kProgram, W, "the IPv6 transaction", "trace {nft6}" POD_V6, 0, "fd00:10:244:1::5]:8080"},
      {"trace", "ipvs", kSnapshotDir, W, "one packet through the IPVS program set (first packets)",
       "trace {ex-ipvs}" POD_V4, 0, "10.244.1.30:9000"},
      {"trace", "ipvs", kProgram, W, "one packet through a program set (kpc compile --backend ipvs -o DIR)",
       "trace {ipvs-dir}" POD_V4, 0, "10.244.1.30:9000"},
      // golden
      {"golden", "iptables", kSnapshotDir, W, "compiled programs against DIR/<node>/*.restore; by Service, by behaviour",
       "golden {ex} --expect {out}/golden-ipt --update", 0, "new"},
      {"golden", "nftables", kSnapshotDir, W, "compiled transactions against DIR/<node>/*.nft; by Service, by behaviour",
       "golden {ex-nft} --expect {out}/golden-nft --update", 0, "new"},
      {"golden", "fastpath", kSnapshotDir, W, "the fast-path table against DIR/<node>/fastpath.nft; by object",
       "golden {ex} --backend fastpath --expect {out}/golden-fp --update", 0, "new"},
      {"golden", "ipvs", kSnapshotDir, R, kNoIpvsGolden, "golden {ex-ipvs} --expect {out}/golden-ipvs", 2, "E0704"},
      {"golden", "any", kProgram, R, kSnapshotsOnly, "golden {ipt} --expect {out}/golden-prog", 2, "E0704"},
      {"golden", "any", kStdin, W, "a snapshot from standard input", "golden - --expect {out}/golden-stdin --update <{ex-file}",
       0, "new"},
      // ipvs drain-plan
      {"ipvs drain-plan", "ipvs", kNodeState, W,
       "per Service what drains, for how many connections, and what a reused client port hits",
       "ipvs drain-plan {ex-ipvs} --prior-state {ipvs-node} --kernel-version 4.19", 1, ""},
  };
  return cells;
}

const Capability* find_capability(std::string_view command, std::string_view mode, std::string_view input) {
  for (const auto& c : capabilities())
    if (c.command == command && (c.mode == mode || c.mode == "any") && c.input == input) return &c;
  return nullptr;
}

std::string refusal(std::string_view command, std::string_view mode, std::string_view input) {
  const Capability* c = find_capability(command, mode, input);
  if (!c || c->support != Support::Refused) return "";
  return "error[E0704]: kpc " + std::string(command) + ": " + (c->mode == "any" ? "" : std::string(mode) + ", ") +
         std::string(input) + ": " + std::string(c->note);
}

namespace {

std::string cell(std::string_view s) {  // a Markdown table cell: a pipe does not end it
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string capabilities_markdown() {
  std::vector<std::string_view> commands;
  for (const auto& c : capabilities())
    if (std::find(commands.begin(), commands.end(), c.command) == commands.end()) commands.push_back(c.command);
  std::string out;
  for (auto cmd : commands) {
    out += "### kpc " + std::string(cmd) + "\n\n| mode | input | support | what it does / what to use instead | example |\n"
           "| --- | --- | --- | --- | --- |\n";
    for (const auto& c : capabilities()) {
      if (c.command != cmd) continue;
      const char* s = c.support == Support::Works ? "yes" : c.support == Support::Sampled ? "by sample" : "refused (E0704)";
      out += "| " + cell(c.mode) + " | " + cell(c.input) + " | " + s + " | " + cell(c.note) + " | `kpc " + cell(c.example) +
             "` |\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace kpc
