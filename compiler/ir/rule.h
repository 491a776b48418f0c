// The ruleset IR: one typed representation of iptables rules shared by the
// compiler (which builds it), the printers (restore text as kube-proxy writes
// it; iptables-save's canonical text), the verifier (which parses text back
// into it and interprets it) and the applier. It knows nothing of Kubernetes.
//
// A rule is its arguments in written order plus a target. Keeping the written
// order lets one printer reproduce kube-proxy's argument order byte for byte
// ("-m comment --comment X -m tcp -p tcp -d IP --dport N"), while the save
// printer re-orders into iptables-save's canonical order for state comparison.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/support/net.h"

namespace kpc::ir {

enum class TableId : uint8_t { Filter, Nat, Mangle, Raw, Security };
const char* table_name(TableId t);
std::optional<TableId> table_from_name(std::string_view s);
/// Built-in chains of a table, in the order iptables-save prints them.
const std::vector<std::string>& builtin_chains(TableId t);
bool is_builtin_chain(TableId t, std::string_view chain);

enum class ArgKind : uint8_t {
  // Base matches (no module).
  Proto,     ///< [!] -p text
  Src,       ///< [!] -s cidr
  Dst,       ///< [!] -d cidr
  InIface,   ///< [!] -i text ("eth+" wildcards allowed)
  OutIface,  ///< [!] -o text
  Fragment,  ///< [!] -f
  Module,    ///< -m text (implicit: loaded by iptables, not written)
  // Options of match modules; each belongs to the closest preceding Module.
  Comment,        ///< --comment text
  SPort,          ///< [!] --sport lo[:hi]  (tcp/udp/sctp)
  DPort,          ///< [!] --dport lo[:hi]
  MultiPorts,     ///< [!] --dports/--sports/--ports text (multiport); text2 = option name
  SrcType,        ///< [!] --src-type text (addrtype)
  DstType,        ///< [!] --dst-type text
  LimitIfaceIn,   ///< --limit-iface-in (addrtype)
  LimitIfaceOut,  ///< --limit-iface-out
  CtState,        ///< [!] --ctstate mask (conntrack) / --state (state)
  MarkMatch,      ///< [!] --mark v/m
  StatMode,       ///< --mode text (statistic)
  Probability,    ///< --probability (value = 31-bit kernel threshold; real = as written)
  StatEvery,      ///< --every n (nth mode)
  StatPacket,     ///< --packet n
  RecentCmd,      ///< --set / --rcheck / --update / --remove  (text = the command)
  RecentSeconds,  ///< --seconds n
  RecentReap,     ///< --reap
  RecentHitcount, ///< --hitcount n
  RecentRttl,     ///< --rttl
  RecentName,     ///< --name text
  RecentMask,     ///< --mask ip (cidr.addr)
  RecentSide,     ///< --rsource / --rdest (text)
  NfacctName,     ///< --nfacct-name text
  MatchSet,       ///< [!] --match-set text text2 (name, flags)
  Physdev,        ///< [!] --physdev-in/-out/--physdev-is-* (text2 = option, text = value)
  Unknown,        ///< any other option: text2 = option word, text = its value tokens (space-joined)
};

enum CtStateBits : uint32_t {
  kCtInvalid = 1, kCtNew = 2, kCtEstablished = 4, kCtRelated = 8, kCtUntracked = 16,
  kCtSnat = 32, kCtDnat = 64,
};
/// "NEW,ESTABLISHED" <-> bit mask; order of names in the text as given is not kept.
std::optional<uint32_t> parse_ctstate(std::string_view s);
std::string ctstate_text(uint32_t mask);  ///< canonical order: INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT

struct Arg {
  ArgKind kind;
  bool neg = false;
  bool implicit = false;  ///< Module only: loaded implicitly (e.g. -p tcp --dport) — not in written text
  bool bare = false;      ///< Src/Dst: written as a bare address ("10.0.0.1", no "/32")
  std::string text;
  std::string text2;
  CIDR cidr;              ///< Src/Dst, RecentMask
  uint32_t value = 0;     ///< ports lo, ctstate mask, mark value, probability threshold, counts
  uint32_t value2 = 0;    ///< ports hi, mark mask
  double real = 0;        ///< Probability as written

  friend bool operator==(const Arg&, const Arg&) = default;
};

enum class TargetKind : uint8_t { None, Jump, Goto, Accept, Drop, Return, Reject, DNAT, SNAT, Masquerade, Mark, Other };
enum class MarkOp : uint8_t { SetXMark, SetMark, OrMark, XorMark, AndMark };

struct Target {
  TargetKind kind = TargetKind::None;
  std::string chain;  ///< Jump/Goto: chain; Other: target name
  // DNAT/SNAT --to-destination/--to-source ADDR[:PORT[-PORT]]
  std::optional<IPAddr> to_addr;
  uint16_t to_port_lo = 0, to_port_hi = 0;
  /// A port range starting at 0 was written (`:0`, `:0-0`, `:0-100`): iptables accepts and
  /// prints it; without this flag port 0 would read as "no port" (kube-proxy never writes it).
  bool to_port_zero = false;
  bool random = false, random_fully = false, persistent = false;
  std::string to_ports;  ///< MASQUERADE --to-ports
  // MARK: the canonical (--set-xmark value/mask) effect plus the spelling used.
  MarkOp mark_op = MarkOp::SetXMark;
  uint32_t mark_value = 0, mark_mask = 0;
  std::string reject_with;  ///< empty = default (icmp[6]-port-unreachable)
  std::vector<std::string> other_args;  ///< Other: option tokens as given

  bool is_chain() const { return kind == TargetKind::Jump || kind == TargetKind::Goto; }
  friend bool operator==(const Target&, const Target&) = default;
};

struct Rule {
  std::vector<Arg> args;
  Target target;
  friend bool operator==(const Rule&, const Rule&) = default;
};

}  // namespace kpc::ir
