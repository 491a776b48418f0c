// What `-m physdev` (xt_physdev) answers for a packet, shared by the concrete
// tracer and the symbolic engine so that both read it the same way (issue 12 §3).
//
// br_netfilter attaches bridge information to a packet that enters a bridge
// port; iptables hooks then see it:
//   * the in port (physindev) in every hook the packet passes after entering:
//     PREROUTING, INPUT, FORWARD, POSTROUTING;
//   * the out port (physoutdev) only when the packet is *bridged* (forwarded by
//     the bridge, not routed), in FORWARD and POSTROUTING. In PREROUTING the
//     bridge has not decided yet, INPUT is routed traffic, and a packet the node
//     itself sends (OUTPUT, its POSTROUTING, the loopback re-entry) carries no
//     bridge information at all.
// The kernel's rules for one option of a match (physdev_mt, Linux >= 4.2):
//   no bridge information: the option passes iff it is negated (`!`);
//   --physdev-is-in:       passes iff there is an in port (always, with info) != `!`;
//   --physdev-is-out, --physdev-is-bridged: there is an out port != `!`;
//   --physdev-in P:        with no in port it passes whatever `!` says, else
//                          name matches P != `!`;
//   --physdev-out P:       with no out port it fails whatever `!` says, else
//                          name matches P != `!`.
// Names match as interfaces do: "veth+" is a prefix, anything else the whole name.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kpc::verifier::trace {

enum class PhysdevOp : unsigned char { In, Out, IsIn, IsOut, IsBridged };

/// The operation of a canonical option word ("--physdev-in" ...), nullopt otherwise.
std::optional<PhysdevOp> physdev_op(std::string_view option);

/// True if the operation reads the out port (only known for bridged packets in
/// FORWARD/POSTROUTING).
bool physdev_reads_out(PhysdevOp op);

/// iptables' interface-name match: "eth+" is a prefix, anything else the exact name.
bool bridge_port_matches(std::string_view pattern, std::string_view name);

/// The kernel's answer for one option. has_info: the packet entered through a bridge
/// port (br_netfilter's information is attached); in: that port; out: the port it is
/// bridged to at this hook ("" when routed or not decided yet).
bool physdev_test(PhysdevOp op, std::string_view pattern, bool neg, bool has_info, std::string_view in,
                  std::string_view out);

}  // namespace kpc::verifier::trace
