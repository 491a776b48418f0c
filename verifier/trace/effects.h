// What a rule does to a packet's fate beyond verdict, route, NAT address and mark,
// shared by the concrete tracer and the symbolic engine so that both read every
// option the same way (issue 12: a change kpc does not model must never be called
// equivalent).
//
// Two things live here:
//  * `-m recent`: one module instance read into a RecentUse. A test (--rcheck,
//    --update, --remove) is decided by the client model: a client remembered by
//    the list, last seen `age` seconds ago, is found iff age < --seconds (any age
//    without --seconds), as xt_recent compares the newest timestamp with
//    now - seconds. What the kernel remembers afterwards is part of the outcome:
//    --set records the client, --update refreshes it and --remove forgets it when
//    found. --reap only evicts *other* clients' stale entries (recent_entry_reap
//    never evicts the entry being matched), so it changes nothing for the packet.
//    --hitcount, --rttl, --rdest and a mask other than the host mask on a test are
//    outside the client model: Unknown.
//  * target options: REJECT's ICMP type, MASQUERADE/SNAT port ranges and port
//    randomisation, DNAT's --random/--persistent. They do not change where a
//    packet goes in the model, but they are behaviour, so they are part of the
//    outcome and any difference in them is a difference.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/rule.h"
#include "compiler/support/net.h"

namespace kpc::verifier::trace {

struct RecentUse {
  enum class Cmd : uint8_t { Set, Rcheck, Update, Remove };
  bool has_cmd = false;
  Cmd cmd = Cmd::Rcheck;
  bool neg = false;            ///< `! --rcheck` ...: the test's result inverted
  std::string list = "DEFAULT";
  uint32_t seconds = 0;        ///< 0: found at any age
  uint32_t hitcount = 0;
  bool reap = false, rttl = false, rdest = false;
  bool default_mask = true;    ///< --mask absent or the family's host mask
  std::string mask;            ///< as written when not the default
};

/// Reads the options of the `-m recent` instance whose Module arg is args[module_index].
RecentUse read_recent(const std::vector<ir::Arg>& args, size_t module_index, IPFamily family);

/// Why the client model cannot decide this use ("" if it can). --set is always decided.
std::string recent_unmodelled(const RecentUse& r);

/// The text of what a found (or, for --set, every) client leaves in the kernel:
/// "set LABEL", "update LABEL", "remove LABEL", with " (rdest)" / " (mask M)" when
/// not the defaults. LABEL names the list (the tracer: its name; the symbolic
/// engine: its canonical key, so renamed lists compare equal).
std::string affinity_effect_text(const RecentUse& r, const std::string& label);

/// The options of a target that are part of an outcome besides its kind, NAT
/// address and mark: "reject-with tcp-reset", "masquerade --to-ports 1024-2047
/// --random-fully", "dnat --persistent". "" when there are none (REJECT without
/// --reject-with and with the family's default type are the same).
std::string target_options_text(const ir::Target& t, IPFamily family);

/// SNAT's outcome text: "10.0.0.1", "10.0.0.1:1024-2047", "[fd00::1]:53", plus
/// " --random" / " --random-fully" / " --persistent".
std::string snat_outcome_text(const ir::Target& t);

/// Targets that change nothing the model tracks (logging, tracing, checksum
/// fill-in): the packet continues with the next rule.
bool is_noop_target(std::string_view name);

/// `-j CT --notrack` and `-j NOTRACK` (raw table, before conntrack): the packet is
/// untracked — conntrack state UNTRACKED, no NAT (the nat table is not consulted),
/// and "notrack" is part of the outcome (no connection entry is behaviour). The
/// kernel ignores CT's other options when --notrack is given. A packet that already
/// has its conntrack entry (the loopback re-entry of a locally sent packet) is left
/// alone. Other CT options (zones, helpers, timeouts, events) are not modelled.
enum class CtTarget : uint8_t { NotCt, Notrack, Unmodelled };
CtTarget ct_target(const ir::Target& t);

/// `-j CONNMARK` (xt_connmark, revision 1; iptables' spellings resolved as libxt_CONNMARK
/// does): the connection mark (connmark) of the packet's conntrack entry.
///   Set:     connmark = (connmark & ~ctmask) ^ value   (--set-xmark V/M; --set-mark V/M is
///            V/(M|V); --and-mark B is 0/~B; --or-mark B is B/B; --xor-mark B is B/0)
///   Save:    connmark = (connmark & ~ctmask) ^ (mark & nfmask)     (--save-mark)
///   Restore: mark = (mark & ~nfmask) ^ (connmark & ctmask)         (--restore-mark)
/// (--mask M sets both masks; each defaults to 0xffffffff.) A packet without a conntrack
/// entry (raw table, before conntrack; INVALID; UNTRACKED) is left alone. A first packet's
/// connection (NEW) has connmark 0; another packet's is what earlier packets left.
/// Shifts (--left/right-shift-mark) and anything else: why != "".
struct ConnmarkOp {
  enum class Kind : uint8_t { Set, Save, Restore } kind = Kind::Set;
  uint32_t value = 0, ctmask = ~0u, nfmask = ~0u;
  std::string why;  ///< not modelled: what
};
ConnmarkOp read_connmark_target(const ir::Target& t);

/// `-m connmark [!] --mark V[/M]`: (connmark & M) == V, negated by `!`; false without a
/// conntrack entry whatever `!` says. args[module_index] is the Module arg.
struct ConnmarkTest {
  uint32_t value = 0, mask = ~0u;
  bool neg = false;
  std::string why;  ///< not modelled: what
};
ConnmarkTest read_connmark_match(const std::vector<ir::Arg>& args, size_t module_index);

/// The outcome's text for a written connmark: "connmark V/K", K the bits known; the others
/// are the connection's earlier mark, flipped where `value` has them set ("(earlier mark ^ F)").
std::string connmark_effect_text(uint32_t value, uint32_t known);

/// Joins effect texts as outcomes carry them ("a; b").
void append_effect(std::string* to, const std::string& effect);

}  // namespace kpc::verifier::trace
