#include "verifier/symbolic/option_semantics.h"

#include "verifier/trace/effects.h"

namespace kpc::verifier::symbolic {

namespace {

using M = OptionMeaning;

struct Row {
  std::string_view owner, option;
  OptionClass cls;
};

// Keep in step with the engine (engine.cpp, compile/apply_target) and the tracer
// (tracer.cpp, evaluate/apply_target); the audit test checks every row by behaviour.
const Row kRows[] = {
    {"", "-s", {M::Modelled, "source address intervals"}},
    {"", "-d", {M::Modelled, "destination address intervals (after DNAT: the new destination)"}},
    {"", "-p", {M::Modelled, "protocol numbers"}},
    {"", "-i", {M::Modelled, "interface atoms (literal names, one per prefix+, one no rule names)"}},
    {"", "-o", {M::Modelled, "interface atoms"}},
    {"", "-f", {M::Modelled, "first packets of connections are not fragments: never matches"}},
    {"comment", "comment", {M::NoOp, "text only (used to name services in reports)"}},
    {"tcp", "sport", {M::Modelled, "port intervals"}},
    {"tcp", "source-port", {M::Modelled, "port intervals"}},
    {"tcp", "dport", {M::Modelled, "port intervals"}},
    {"tcp", "destination-port", {M::Modelled, "port intervals"}},
    {"tcp", "tcp-flags", {M::Unknown, "TCP flags are not a packet-class field"}},
    {"tcp", "syn", {M::Unknown, "TCP flags are not a packet-class field"}},
    {"tcp", "tcp-option", {M::Unknown, "TCP options are not a packet-class field"}},
    {"udp", "sport", {M::Modelled, "port intervals"}},
    {"udp", "source-port", {M::Modelled, "port intervals"}},
    {"udp", "dport", {M::Modelled, "port intervals"}},
    {"udp", "destination-port", {M::Modelled, "port intervals"}},
    {"sctp", "sport", {M::Modelled, "port intervals"}},
    {"sctp", "source-port", {M::Modelled, "port intervals"}},
    {"sctp", "dport", {M::Modelled, "port intervals"}},
    {"sctp", "destination-port", {M::Modelled, "port intervals"}},
    {"sctp", "chunk-types", {M::Unknown, "SCTP chunks are not a packet-class field"}},
    {"addrtype", "src-type", {M::Modelled, "LOCAL exactly (node addresses and loopback); other types of a non-local address depend on the routing table: Unknown"}},
    {"addrtype", "dst-type", {M::Modelled, "as --src-type"}},
    {"addrtype", "limit-iface-in", {M::Unknown, "per-interface address types need the routing table"}},
    {"addrtype", "limit-iface-out", {M::Unknown, "per-interface address types need the routing table"}},
    {"conntrack", "ctstate", {M::Modelled, "state x SNAT/DNAT bits"}},
    {"conntrack", "ctproto", {M::Unknown, "conntrack tuple fields are not modelled"}},
    {"conntrack", "ctorigsrc", {M::Unknown, "conntrack tuple fields are not modelled"}},
    {"conntrack", "ctorigdst", {M::Unknown, "conntrack tuple fields are not modelled"}},
    {"conntrack", "ctreplsrc", {M::Unknown, "conntrack tuple fields are not modelled"}},
    {"conntrack", "ctrepldst", {M::Unknown, "conntrack tuple fields are not modelled"}},
    {"conntrack", "ctorigsrcport", {M::Unknown, "conntrack tuple fields are not modelled"}},
    {"conntrack", "ctorigdstport", {M::Unknown, "conntrack tuple fields are not modelled"}},
    {"conntrack", "ctreplsrcport", {M::Unknown, "conntrack tuple fields are not modelled"}},
    {"conntrack", "ctrepldstport", {M::Unknown, "conntrack tuple fields are not modelled"}},
    {"conntrack", "ctstatus", {M::Unknown, "conntrack status bits are not modelled"}},
    {"conntrack", "ctexpire", {M::Unknown, "conntrack timeouts are not modelled"}},
    {"conntrack", "ctdir", {M::Unknown, "packet direction is not modelled"}},
    {"state", "state", {M::Modelled, "state bits (no NAT bits)"}},
    {"mark", "mark", {M::Modelled, "the mark as a function of the arriving mark"}},
    {"statistic", "mode", {M::Modelled, "random: exact probabilities; nth: Unknown (a packet counter)"}},
    {"statistic", "probability", {M::Modelled, "exact t/2^31 per rule"}},
    {"statistic", "every", {M::Unknown, "nth mode depends on a packet counter"}},
    {"statistic", "packet", {M::Unknown, "nth mode depends on a packet counter"}},
    {"recent", "set", {M::Modelled, "the list write is part of the outcome"}},
    {"recent", "rcheck", {M::Modelled, "client model: new, or remembered by a list"}},
    {"recent", "update", {M::Modelled, "client model; the refresh is part of the outcome"}},
    {"recent", "remove", {M::Modelled, "client model; the removal is part of the outcome"}},
    {"recent", "seconds", {M::Modelled, "age buckets of remembered clients"}},
    {"recent", "reap", {M::NoOp, "evicts other clients' stale entries only (recent_entry_reap skips the entry being matched)"}},
    {"recent", "hitcount", {M::Unknown, "hit counts are not part of the client model"}},
    {"recent", "rttl", {M::Unknown, "TTLs are not part of the client model"}},
    {"recent", "name", {M::Modelled, "lists keyed by service and endpoint"}},
    {"recent", "mask", {M::Modelled, "part of a list write; a test with a mask other than the host mask is Unknown"}},
    {"recent", "rsource", {M::Modelled, "the default side"}},
    {"recent", "rdest", {M::Modelled, "part of a list write; a test by destination is Unknown"}},
    {"nfacct", "nfacct-name", {M::NoOp, "counts packets, always matches"}},
    {"set", "match-set", {M::Unknown, "ipset contents are not known"}},
    {"set", "set", {M::Unknown, "ipset contents are not known"}},
    {"set", "return-nomatch", {M::Unknown, "ipset contents are not known"}},
    {"set", "update-counters", {M::Unknown, "ipset counters are not known"}},
    {"set", "update-subcounters", {M::Unknown, "ipset counters are not known"}},
    {"set", "packets-eq", {M::Unknown, "ipset counters are not known"}},
    {"set", "packets-lt", {M::Unknown, "ipset counters are not known"}},
    {"set", "packets-gt", {M::Unknown, "ipset counters are not known"}},
    {"set", "bytes-eq", {M::Unknown, "ipset counters are not known"}},
    {"set", "bytes-lt", {M::Unknown, "ipset counters are not known"}},
    {"set", "bytes-gt", {M::Unknown, "ipset counters are not known"}},
    {"multiport", "dports", {M::Modelled, "port lists"}},
    {"multiport", "destination-ports", {M::Modelled, "port lists"}},
    {"multiport", "sports", {M::Modelled, "port lists"}},
    {"multiport", "source-ports", {M::Modelled, "port lists"}},
    {"multiport", "ports", {M::Modelled, "either port listed"}},
    {"physdev", "physdev-in", {M::Modelled, "bridge-port atoms the packet entered through (none, each name, each prefix, one no rule names)"}},
    {"physdev", "physdev-out", {M::Modelled, "bridge-port atoms it is bridged to: known in FORWARD/POSTROUTING only, never for routed packets"}},
    {"physdev", "physdev-is-in", {M::Modelled, "entered through a bridge port (bridge-port atom other than none)"}},
    {"physdev", "physdev-is-out", {M::Modelled, "bridged to a port (FORWARD/POSTROUTING)"}},
    {"physdev", "physdev-is-bridged", {M::Modelled, "as --physdev-is-out (the kernel tests the out port)"}},
    {"icmp", "icmp-type", {M::Unknown, "ICMP is not traced"}},
    {"icmp6", "icmpv6-type", {M::Unknown, "ICMPv6 is not traced"}},
    {"DNAT", "to-destination", {M::Modelled, "new destination and port; a port range is Unknown"}},
    {"DNAT", "random", {M::Modelled, "part of the outcome (options)"}},
    {"DNAT", "persistent", {M::Modelled, "part of the outcome (options)"}},
    {"SNAT", "to-source", {M::Modelled, "part of the outcome (address, port range)"}},
    {"SNAT", "random", {M::Modelled, "part of the outcome"}},
    {"SNAT", "random-fully", {M::Modelled, "part of the outcome"}},
    {"SNAT", "persistent", {M::Modelled, "part of the outcome"}},
    {"MASQUERADE", "to-ports", {M::Modelled, "part of the outcome (options)"}},
    {"MASQUERADE", "random", {M::Modelled, "part of the outcome (options)"}},
    {"MASQUERADE", "random-fully", {M::Modelled, "part of the outcome (options)"}},
    {"REJECT", "reject-with", {M::Modelled, "part of the outcome (options; the family's default type is the same as none)"}},
    {"MARK", "set-xmark", {M::Modelled, "the mark function"}},
    {"MARK", "set-mark", {M::Modelled, "the mark function"}},
    {"MARK", "and-mark", {M::Modelled, "the mark function"}},
    {"MARK", "or-mark", {M::Modelled, "the mark function"}},
    {"MARK", "xor-mark", {M::Modelled, "the mark function"}},
};

}  // namespace

const char* option_meaning_name(OptionMeaning m) {
  switch (m) {
    case OptionMeaning::Modelled: return "modelled";
    case OptionMeaning::NoOp: return "no-op";
    case OptionMeaning::Unknown: return "unknown";
  }
  return "?";
}

std::optional<OptionClass> option_class(std::string_view owner, std::string_view option) {
  for (const Row& r : kRows)
    if (r.owner == owner && r.option == option) return r.cls;
  return std::nullopt;
}

OptionClass target_class(std::string_view name) {
  for (std::string_view t : {"ACCEPT", "DROP", "RETURN", "DNAT", "SNAT", "MASQUERADE", "REJECT", "MARK"})
    if (name == t) return {M::Modelled, "verdicts, NAT and marks"};
  if (name == "CONNMARK")
    return {M::Modelled, "the connection mark as a function of the arriving mark and connmark (a new connection's is 0); "
                         "shifts, a bit mixing both, --restore-mark of an earlier connection's mark: Unknown"};
  if (name == "NOTRACK") return {M::Modelled, "the packet is untracked (conntrack UNTRACKED, no NAT): part of the outcome"};
  if (name == "CT") return {M::Modelled, "--notrack as NOTRACK; any other CT option (zone, helper, timeout, events): Unknown"};
  if (trace::is_noop_target(name)) return {M::NoOp, "logging, tracing or checksum fill-in: the packet continues"};
  return {M::Unknown, "target not modelled: the packet's outcome is Unknown"};
}

}  // namespace kpc::verifier::symbolic
