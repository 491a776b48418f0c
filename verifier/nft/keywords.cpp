// Names nft 1.0.6 does not take unquoted: words its scanner reads as keywords where a table,
// chain, set, map or flowtable name is expected (`add chain ip t jump`: "syntax error,
// unexpected jump, expecting string"). Derived from nft itself: every token name of its parser
// (the quoted words in libnftables.so.1) written, unquoted, as a table name, a chain name, a set
// name, a map name, a rule's chain, a jump target and a set reference, each checked with
// `nft -c` in a network namespace; a word nft refused in any of those places is listed (session
// 15). The operator words (`and`, `xor`, `eq`, `lshift`, ...), whose token names are symbols,
// were checked so too. Words nft reads as keywords only in some contexts (`in`, `out`, `state`,
// `data`) are taken everywhere and are not listed. NftModelKernel.KeywordNamesAsInNft derives the
// list again.
#include <algorithm>
#include <iterator>
#include <string_view>

#include "verifier/nft/internal.h"

namespace kpc::verifier::nft {

namespace {
// sorted
constexpr std::string_view kKeywordNames[] = {
    "accept", "add", "ah", "all", "and", "arp", "auto-merge", "bridge", "cgroup", "chain",
    "comment", "comp", "constant", "continue", "counter", "cpu", "create", "ct", "day", "dccp",
    "define", "delete", "describe", "device", "devices", "dnat", "drop", "dst", "dup", "dynamic",
    "ecn", "element", "elements", "eq", "esp", "ether", "exists", "expires", "export", "exthdr",
    "fib", "flags", "flow", "flowtable", "flush", "frag", "fwd", "gc-interval", "ge", "get", "goto",
    "gt", "handle", "hbh", "hook", "hour", "ibriport", "ibrname", "icmp", "icmpv6", "igmp", "iif",
    "iifgroup", "iifname", "iiftype", "import", "include", "index", "inet", "insert", "interval",
    "ip", "ip6", "ipsec", "jhash", "jump", "le", "limit", "list", "ll", "log", "lshift", "lt",
    "map", "mark", "masquerade", "meta", "meter", "mh", "missing", "monitor", "ne", "netdev",
    "nftrace", "nh", "not", "notrack", "numgen", "obriport", "obrname", "offload", "oif",
    "oifgroup", "oifname", "oiftype", "or", "osf", "pkttype", "policy", "position", "priority",
    "queue", "quota", "random", "redefine", "redirect", "reject", "rename", "replace", "reset",
    "return", "rshift", "rt", "rt0", "rt2", "rtclassid", "rule", "ruleset", "sctp", "secmark",
    "set", "size", "skgid", "skuid", "snat", "socket", "srh", "symhash", "synproxy", "table", "tcp",
    "th", "time", "timeout", "tproxy", "type", "typeof", "udp", "udplite", "undefine", "update",
    "vlan", "vmap", "xor", "xt",
};

// Every word nft 1.0.6's parser has a token for (the quoted token names in libnftables.so.1,
// `strings | grep -E '^"[a-z][a-z0-9_-]*"$'`), keywords of every scanner state among them. A
// word outside this list and kKeywordNames is nft's `string` token wherever it is read, so the
// model can tell what nft says of it (statement.cpp); a word in it may be a keyword where it
// stands. NftModelKernel.ParserWordsAsInNft derives the list again.
constexpr std::string_view kParserWords[] = {
    "a-rwnd", "abort", "accept", "ackseq", "add", "addr", "ah", "all", "arp", "asconf", "asconf-ack",
    "auto-merge", "avgpkt", "bridge", "burst", "bypass", "bytes", "cfi", "cgroup", "cgroupv2", "chain",
    "chains", "checksum", "chunk", "classid", "code", "colon", "comma", "comment", "comp", "constant",
    "continue", "cookie-ack", "cookie-echo", "count", "counter", "counters", "cpi", "cpu", "create",
    "csumcov", "ct", "cum-tsn-ack", "cwr", "daddr", "data", "day", "dccp", "define", "dei", "delete",
    "describe", "device", "devices", "direction", "dnat", "doff", "dport", "drop", "dscp", "dst",
    "dup", "dynamic", "echo", "ecn", "ecne", "element", "elements", "eol", "error", "esp", "ether",
    "event", "exists", "expectation", "expiration", "expires", "export", "exthdr", "fanout",
    "fastopen", "fib", "flags", "flow", "flowlabel", "flowtable", "flowtables", "flush", "forward-tsn",
    "frag", "frag-off", "fully-random", "fwd", "gateway", "gc-interval", "get", "goto", "group",
    "handle", "hbh", "hdrlength", "heartbeat", "heartbeat-ack", "helper", "helpers", "hlen", "hook",
    "hooks", "hoplimit", "hour", "htype", "ibriport", "ibrname", "icmp", "icmpv6", "icmpx", "id",
    "igmp", "iif", "iifgroup", "iifname", "iiftype", "import", "in", "inc", "include", "index", "inet",
    "init", "init-ack", "init-tag", "initial-tsn", "insert", "interval", "ip", "ip6", "ipsec", "jhash",
    "json", "jump", "junk", "l3proto", "label", "last-entry", "left", "length", "level", "limit",
    "limits", "list", "ll", "log", "lowest-tsn", "lsrr", "map", "maps", "mark", "masquerade",
    "max-delay", "md5sig", "memory", "meta", "meter", "meters", "mh", "minute", "missing", "mod",
    "monitor", "more-fragments", "mptcp", "mrt", "mss", "mtu", "name", "netdev", "new-cum-tsn",
    "newline", "nexthdr", "nexthop", "nftrace", "nh", "nop", "notrack", "num", "num-dup-tsns",
    "num-gap-ack-blocks", "num-inbound-streams", "num-outbound-streams", "number", "numgen",
    "obriport", "obrname", "offload", "offset", "oif", "oifgroup", "oifname", "oiftype", "operation",
    "option", "options", "original", "osf", "out", "over", "packets", "param-problem", "pcp",
    "performance", "persistent", "pkttype", "plen", "policy", "port", "position", "ppid", "prefix",
    "priority", "proto-dst", "proto-src", "protocol", "ptr", "ptype", "queue", "queue-threshold",
    "quota", "quotas", "ra", "random", "rate", "redefine", "redirect", "reject", "rename", "replace",
    "reply", "reqid", "reserved", "reserved2", "reset", "return", "right", "rr", "rt", "rt0", "rt2",
    "rtclassid", "rule", "rules", "ruleset", "sack", "sack-permitted", "sack0", "sack1", "sack2",
    "sack3", "saddr", "sctp", "secmark", "secmarks", "second", "seed", "seg-left", "semicolon", "seq",
    "seqno", "set", "sets", "shutdown", "shutdown-ack", "shutdown-complete", "sid", "size", "skgid",
    "skuid", "snaplen", "snat", "socket", "spi", "spnum", "sport", "srh", "ssn", "ssrr", "state",
    "status", "stream", "string", "subtype", "symhash", "synproxy", "synproxys", "table", "tables",
    "tag", "tcp", "th", "time", "timeout", "timestamp", "to", "tproxy", "trace", "transparent",
    "tsecr", "tsn", "tsval", "ttl", "type", "typeof", "udp", "udplite", "undefine", "until", "update",
    "urgptr", "used", "value", "version", "vlan", "vm", "vmap", "vtag", "week", "wildcard", "window",
    "with", "wscale", "xml", "xt", "zone",
};
static_assert(std::is_sorted(std::begin(kParserWords), std::end(kParserWords)), "binary_search needs the list sorted");
}  // namespace

bool is_parser_word(std::string_view w) {
  return std::binary_search(std::begin(kParserWords), std::end(kParserWords), w);
}
std::vector<std::string_view> parser_words() { return {std::begin(kParserWords), std::end(kParserWords)}; }

constexpr size_t longest_keyword_name() {
  size_t m = 0;
  for (std::string_view w : kKeywordNames) m = std::max(m, w.size());
  return m;
}
constexpr size_t kLongestKeywordName = longest_keyword_name();
static_assert(std::is_sorted(std::begin(kKeywordNames), std::end(kKeywordNames)), "binary_search needs the list sorted");

bool is_keyword_name(std::string_view name) {
  // kube-proxy's names are longer than any keyword: no search for them
  if (name.size() > kLongestKeywordName) return false;
  return std::binary_search(std::begin(kKeywordNames), std::end(kKeywordNames), name);
}

std::vector<std::string_view> keyword_names() { return {std::begin(kKeywordNames), std::end(kKeywordNames)}; }

// nft's scanner reads an unquoted name as its `string` token: a letter first (kpc does not
// take nft's `_` / `.` starts, which other tokens may win), then letters, digits and / - _ .
// (A table of the bytes: every name of every command and rule is checked, and the comparisons
// chain took 5 % of parsing a 10,000-Service transaction.)
namespace {
struct NameBytes {
  bool first[256] = {}, rest[256] = {};
  constexpr NameBytes() {
    for (int c = 'a'; c <= 'z'; ++c) first[c] = rest[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) first[c] = rest[c] = true;
    for (int c = '0'; c <= '9'; ++c) rest[c] = true;
    for (unsigned char c : {'/', '-', '_', '.'}) rest[c] = true;
  }
};
constexpr NameBytes kNameBytes;
}  // namespace

bool is_string_token(std::string_view word) {
  if (word.empty() || !kNameBytes.first[static_cast<unsigned char>(word[0])]) return false;
  for (char c : word)
    if (!kNameBytes.rest[static_cast<unsigned char>(c)]) return false;
  return true;
}

bool is_plain_name(std::string_view name) { return is_string_token(name) && !is_keyword_name(name); }

namespace detail {
void refuse_unplain_name(const Token& t) {
  if ((t.kind == Tok::Word || t.kind == Tok::SetRef) && !is_plain_name(t.text))
    throw ParseFailure{t.loc, "the name '" + std::string(t.text) + "' is an nft keyword or not a plain name (nft takes it quoted only)", true};
}
}  // namespace detail

}  // namespace kpc::verifier::nft
