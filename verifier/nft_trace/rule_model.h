// A rule of the nft model (verifier/nft) read into what the packet tracer evaluates:
// matches, lookups, verdict maps and statements, in the rule's order.
//
// The input is the text `nft list` prints for the rule (Rule::canonical; the model holds no
// rule outside kube-proxy's vocabulary, but a listing read some other way may). Reading stops at
// the first statement kpc does not know: that statement, and everything after it, becomes
// one Unknown statement. Evaluation is left to right, so a rule whose earlier match is
// false is still decided (sound: a false match ends the rule whatever follows).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/support/net.h"

namespace kpc::verifier::nft_trace {

/// A packet or conntrack field an expression reads.
enum class Field : uint8_t {
  IpSaddr, IpDaddr,        ///< ip / ip6 saddr, daddr (family from the width)
  L4proto,                 ///< meta l4proto, ip protocol
  ThDport, ThSport,        ///< th / tcp / udp / sctp dport, sport
  Mark,                    ///< meta mark
  Iifname, Oifname,        ///< interface names
  Iif, Oif,                ///< interface indexes (compared by name: nft resolves names once)
  CtState, CtStatus,       ///< conntrack state / status bits
  FibSaddrType, FibDaddrType,  ///< fib saddr|daddr type
  Numgen,                  ///< numgen random mod N [offset O]
};
const char* field_name(Field f);

/// A value of a field: addresses as IPAddr, names as text, everything else as a number.
struct Value {
  IPAddr addr;
  uint64_t num = 0;
  std::string str;  ///< interface name, fib type
};

/// One field of an element or of a comparison's right-hand side: a single value, a prefix
/// or a range (inclusive), or an interface-name wildcard ("eth*").
struct Range {
  Value lo, hi;
  bool wildcard = false;  ///< str is a prefix
};

/// The left-hand side: one field or a concatenation.
struct Key {
  std::vector<Field> fields;
  std::optional<uint8_t> implied_proto;  ///< `tcp dport`: nft adds `meta l4proto tcp`
  std::optional<uint32_t> mark_mask;     ///< `meta mark & M`
  uint32_t numgen_mod = 0, numgen_offset = 0;
  std::string text;
};

enum class VerdictKind : uint8_t { None, Accept, Drop, Return, Continue, Jump, Goto };
struct VerdictSpec {
  VerdictKind kind = VerdictKind::None;
  std::string chain;
  std::string text() const;
};

struct Element {
  std::vector<Range> key;  ///< one per key field
  VerdictSpec verdict;     ///< maps
};

struct Stmt {
  enum Kind : uint8_t {
    Match,      ///< key op rhs (elements), or key op @set
    Vmap,       ///< key vmap @map / vmap { ... }
    Verdict,    ///< accept, drop, return, continue, jump, goto
    Reject,
    Masquerade,
    Snat,
    Dnat,
    MarkSet,    ///< meta mark set [meta mark OP] V
    SetUpdate,  ///< update / add @set { key }
    Noop,       ///< counter, log
    Unknown,    ///< not modelled: the rest of the rule
  } kind = Unknown;
  Key key;
  bool negate = false;
  std::string set;                 ///< @set / @map name, or the updated set
  bool anonymous = false;          ///< rhs / map given inline
  std::vector<Element> elements;   ///< inline elements
  VerdictSpec verdict;
  // nat
  std::optional<IPAddr> nat_addr;
  std::optional<uint16_t> nat_port;
  std::string options;             ///< reject / masquerade / nat flags as written
  // mark
  char mark_op = '=';              ///< '=', '|', '^', '&'
  uint32_t mark_value = 0;
  std::string update_verb;         ///< "update" / "add"
  std::string text;                ///< the statement as written (Unknown: the rest)
};

struct RuleModel {
  std::vector<Stmt> stmts;
  std::string comment;
};

/// Reads a rule's listed text for a table of the given address family (false: ip6).
RuleModel read_rule(std::string_view text, bool ipv4);

/// Reads an element field / map value text of the model (canonical key text) for a field.
/// False if kpc cannot read it (the lookup is then Unknown).
bool read_range(Field f, std::string_view text, bool ipv4, Range* out);
bool read_verdict(std::string_view text, VerdictSpec* out);

/// True if v (a field's value) is in r.
bool in_range(Field f, const Value& v, const Range& r);

}  // namespace kpc::verifier::nft_trace
