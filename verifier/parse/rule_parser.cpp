// One rule line -> ir::Op, the way iptables' do_parse (xshared.c, v1.8.x) reads
// argv: getopt order, `!` before the option it inverts, modules' options merged
// as they load (the latest module that knows an option takes it), protocol
// modules loaded implicitly for an unknown option when -p names one, target
// options anywhere after -j. Messages are the real tool's where it has one.
#include <netdb.h>
#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "verifier/parse/parser.h"

#include "compiler/support/text.h"

namespace kpc::verifier {
namespace {

using ir::Arg;
using ir::ArgKind;
using ir::Op;
using ir::OpKind;
using ir::Rule;
using ir::Target;
using ir::TargetKind;

constexpr size_t kMaxChainName = 28;  // XT_EXTENSION_MAXNAMELEN - 1
constexpr size_t kMaxIfName = 15;     // IFNAMSIZ - 1

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

// xtables_strtoui(s, NULL, &v, min, max) with base 0 (0x.., 0.. octal, decimal).
bool parse_uint(std::string_view s, uint64_t max, uint32_t* out, int base = 0) {
  if (s.empty() || s.size() > 32) return false;
  std::string tmp(s);
  if (tmp[0] == '-' || tmp[0] == '+' || std::isspace(static_cast<unsigned char>(tmp[0]))) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(tmp.c_str(), &end, base);
  if (errno || end != tmp.c_str() + tmp.size() || v > max) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool parse_port(std::string_view s, uint32_t* out) { return parse_uint(s, 65535, out, 10); }

// Module and option catalog --------------------------------------------------

enum class OptType : uint8_t {
  Comment, SPort, DPort, SrcType, DstType, LimitIn, LimitOut, CtState, State, Mark, StatMode, Probability, Every,
  Packet, RecentCmd, Seconds, Reap, Hitcount, Rttl, RecentName, RecentMask, RSide, Nfacct, MatchSet, MultiPorts,
  PhysdevArg, PhysdevFlag, Unknown,
};

struct OptDef {
  std::string_view name;
  OptType type;
  int nargs;      // 0, 1 or 2 (-1: greedy, for unmodelled modules)
  bool invert;    // accepts a preceding `!`
  const char* canonical = nullptr;  // canonical option name for save (multiport/physdev/aliases)
};

struct ModuleDef {
  std::string_view name;
  std::vector<OptDef> opts;
};

const std::vector<ModuleDef>& modules() {
  static const std::vector<ModuleDef> m = {
      {"comment", {{"comment", OptType::Comment, 1, false}}},
      {"tcp",
       {{"sport", OptType::SPort, 1, true}, {"source-port", OptType::SPort, 1, true},
        {"dport", OptType::DPort, 1, true}, {"destination-port", OptType::DPort, 1, true},
        {"tcp-flags", OptType::Unknown, 2, true}, {"syn", OptType::Unknown, 0, true},
        {"tcp-option", OptType::Unknown, 1, true}}},
      {"udp",
       {{"sport", OptType::SPort, 1, true}, {"source-port", OptType::SPort, 1, true},
        {"dport", OptType::DPort, 1, true}, {"destination-port", OptType::DPort, 1, true}}},
      {"sctp",
       {{"sport", OptType::SPort, 1, true}, {"source-port", OptType::SPort, 1, true},
        {"dport", OptType::DPort, 1, true}, {"destination-port", OptType::DPort, 1, true},
        {"chunk-types", OptType::Unknown, 2, true}}},
      {"addrtype",
       {{"src-type", OptType::SrcType, 1, true}, {"dst-type", OptType::DstType, 1, true},
        {"limit-iface-in", OptType::LimitIn, 0, false}, {"limit-iface-out", OptType::LimitOut, 0, false}}},
      {"conntrack",
       {{"ctstate", OptType::CtState, 1, true}, {"ctproto", OptType::Unknown, 1, true},
        {"ctorigsrc", OptType::Unknown, 1, true}, {"ctorigdst", OptType::Unknown, 1, true},
        {"ctreplsrc", OptType::Unknown, 1, true}, {"ctrepldst", OptType::Unknown, 1, true},
        {"ctorigsrcport", OptType::Unknown, 1, true}, {"ctorigdstport", OptType::Unknown, 1, true},
        {"ctreplsrcport", OptType::Unknown, 1, true}, {"ctrepldstport", OptType::Unknown, 1, true},
        {"ctstatus", OptType::Unknown, 1, true}, {"ctexpire", OptType::Unknown, 1, true},
        {"ctdir", OptType::Unknown, 1, false}}},
      {"state", {{"state", OptType::State, 1, true}}},
      {"mark", {{"mark", OptType::Mark, 1, true}}},
      {"statistic",
       {{"mode", OptType::StatMode, 1, false}, {"probability", OptType::Probability, 1, true},
        {"every", OptType::Every, 1, true}, {"packet", OptType::Packet, 1, false}}},
      {"recent",
       {{"set", OptType::RecentCmd, 0, true}, {"rcheck", OptType::RecentCmd, 0, true},
        {"update", OptType::RecentCmd, 0, true}, {"remove", OptType::RecentCmd, 0, true},
        {"seconds", OptType::Seconds, 1, false}, {"reap", OptType::Reap, 0, false},
        {"hitcount", OptType::Hitcount, 1, false}, {"rttl", OptType::Rttl, 0, false},
        {"name", OptType::RecentName, 1, false}, {"mask", OptType::RecentMask, 1, false},
        {"rsource", OptType::RSide, 0, false}, {"rdest", OptType::RSide, 0, false}}},
      {"nfacct", {{"nfacct-name", OptType::Nfacct, 1, false}}},
      {"set",
       {{"match-set", OptType::MatchSet, 2, true}, {"set", OptType::MatchSet, 2, true},
        {"return-nomatch", OptType::Unknown, 0, false}, {"update-counters", OptType::Unknown, 0, true},
        {"update-subcounters", OptType::Unknown, 0, true}, {"packets-eq", OptType::Unknown, 1, true},
        {"packets-lt", OptType::Unknown, 1, false}, {"packets-gt", OptType::Unknown, 1, false},
        {"bytes-eq", OptType::Unknown, 1, true}, {"bytes-lt", OptType::Unknown, 1, false},
        {"bytes-gt", OptType::Unknown, 1, false}}},
      {"multiport",
       {{"dports", OptType::MultiPorts, 1, true, "--dports"},
        {"destination-ports", OptType::MultiPorts, 1, true, "--dports"},
        {"sports", OptType::MultiPorts, 1, true, "--sports"},
        {"source-ports", OptType::MultiPorts, 1, true, "--sports"},
        {"ports", OptType::MultiPorts, 1, true, "--ports"}}},
      {"physdev",
       {{"physdev-in", OptType::PhysdevArg, 1, true, "--physdev-in"},
        {"physdev-out", OptType::PhysdevArg, 1, true, "--physdev-out"},
        {"physdev-is-in", OptType::PhysdevFlag, 0, true, "--physdev-is-in"},
        {"physdev-is-out", OptType::PhysdevFlag, 0, true, "--physdev-is-out"},
        {"physdev-is-bridged", OptType::PhysdevFlag, 0, true, "--physdev-is-bridged"}}},
      {"icmp", {{"icmp-type", OptType::Unknown, 1, true}}},
      {"icmp6", {{"icmpv6-type", OptType::Unknown, 1, true}}},
  };
  return m;
}

const ModuleDef* find_module(std::string_view name) {
  for (const auto& m : modules())
    if (name == m.name) return &m;
  return nullptr;
}

const OptDef* find_opt(const ModuleDef& m, std::string_view name) {
  for (const auto& o : m.opts)
    if (name == o.name) return &o;
  return nullptr;
}

// Target catalog --------------------------------------------------------------

enum class TOpt : uint8_t { ToDest, ToSource, ToPorts, Random, RandomFully, Persistent, RejectWith, SetXMark, SetMark,
                            AndMark, OrMark, XorMark };
struct TOptDef {
  const char* name;
  TOpt type;
  int nargs;
};

const std::vector<TOptDef>* target_opts(TargetKind k) {
  static const std::vector<TOptDef> dnat = {{"to-destination", TOpt::ToDest, 1}, {"random", TOpt::Random, 0},
                                            {"persistent", TOpt::Persistent, 0}};
  static const std::vector<TOptDef> snat = {{"to-source", TOpt::ToSource, 1}, {"random", TOpt::Random, 0},
                                            {"random-fully", TOpt::RandomFully, 0}, {"persistent", TOpt::Persistent, 0}};
  static const std::vector<TOptDef> masq = {{"to-ports", TOpt::ToPorts, 1}, {"random", TOpt::Random, 0},
                                            {"random-fully", TOpt::RandomFully, 0}};
  static const std::vector<TOptDef> reject = {{"reject-with", TOpt::RejectWith, 1}};
  static const std::vector<TOptDef> mark = {{"set-xmark", TOpt::SetXMark, 1}, {"set-mark", TOpt::SetMark, 1},
                                            {"and-mark", TOpt::AndMark, 1},   {"or-mark", TOpt::OrMark, 1},
                                            {"xor-mark", TOpt::XorMark, 1}};
  switch (k) {
    case TargetKind::DNAT: return &dnat;
    case TargetKind::SNAT: return &snat;
    case TargetKind::Masquerade: return &masq;
    case TargetKind::Reject: return &reject;
    case TargetKind::Mark: return &mark;
    default: return nullptr;
  }
}

// Extensions of iptables 1.8.9 ------------------------------------------------
//
// iptables loads `-m NAME` and `-j NAME` from /usr/lib/x86_64-linux-gnu/xtables:
// libxt_NAME.so (both families), then libipt_NAME.so (iptables) or libip6t_NAME.so
// (ip6tables); a name no file registers is refused ("Couldn't load match `NAME'"), and
// a -j name that is no target extension is a chain name. The lists below are the names
// those files register, from the file list of Debian 12's iptables package
// (`dpkg -L iptables | grep xtables/`, iptables 1.8.9-2; libebt_*/libarpt_* are
// ebtables'/arptables' and never loaded by iptables), each checked with the real tools
// in a network namespace (`-m NAME` loads or not, `-N NAME` clashes with a target or
// not; legacy and nft, IPv4 and IPv6) and re-checked by tests/kernel/verifier_extensions_test.cpp.
// Notes: libxt_state.so -> libxt_conntrack.so, libxt_{SNAT,DNAT,MASQUERADE,REDIRECT}.so ->
// libxt_NAT.so (which registers no "NAT"), libxt_NOTRACK.so -> libxt_CT.so; libxt_osf
// registers an IPv4 match only; ACCEPT, DROP, QUEUE and RETURN are the "standard" target.
// Whether the running kernel has the module behind an extension (CLUSTERIP, ULOG and LED
// print "missing kernel module?" on 6.x kernels) is the kernel's business, not modelled.
constexpr std::string_view kMatchesBoth[] = {
    "addrtype", "ah", "bpf", "cgroup", "cluster", "comment", "connbytes", "connlabel", "connlimit", "connmark",
    "conntrack", "cpu", "dccp", "devgroup", "dscp", "ecn", "esp", "hashlimit", "helper", "ipcomp", "iprange",
    "ipvs", "length", "limit", "mac", "mark", "multiport", "nfacct", "owner", "physdev", "pkttype", "policy",
    "quota", "rateest", "recent", "rpfilter", "sctp", "set", "socket", "state", "statistic", "string", "tcp",
    "tcpmss", "time", "tos", "u32", "udp"};
constexpr std::string_view kMatches4[] = {"icmp", "osf", "realm", "ttl"};
constexpr std::string_view kMatches6[] = {"dst", "eui64", "frag", "hbh", "hl", "icmp6", "ipv6header", "mh", "rt", "srh"};
constexpr std::string_view kTargetsBoth[] = {
    "ACCEPT", "DROP", "QUEUE", "RETURN", "standard", "AUDIT", "CHECKSUM", "CLASSIFY", "CONNMARK", "CONNSECMARK",
    "CT", "DNAT", "DSCP", "HMARK", "IDLETIMER", "LED", "LOG", "MARK", "MASQUERADE", "NETMAP", "NFLOG", "NFQUEUE",
    "NOTRACK", "RATEEST", "REDIRECT", "REJECT", "SECMARK", "SET", "SNAT", "SYNPROXY", "TCPMSS", "TCPOPTSTRIP",
    "TEE", "TOS", "TPROXY", "TRACE"};
constexpr std::string_view kTargets4[] = {"CLUSTERIP", "ECN", "TTL", "ULOG"};
constexpr std::string_view kTargets6[] = {"DNPT", "HL", "SNPT"};

template <size_t N>
bool listed(const std::string_view (&names)[N], std::string_view name) {
  for (std::string_view n : names)  // string_view: sizes compare first, no strlen per entry
    if (name == n) return true;
  return false;
}

// Protocols -------------------------------------------------------------------

struct ProtoName {
  const char* name;
  uint32_t num;
};
constexpr ProtoName kProtos[] = {{"tcp", 6},  {"sctp", 132}, {"udp", 17},       {"udplite", 136},
                                 {"icmp", 1}, {"icmpv6", 58}, {"ipv6-icmp", 58}, {"esp", 50},
                                 {"ah", 51},  {"mh", 135},   {"all", 0},        {"gre", 47},
                                 {"dccp", 33}, {"ipv6-mh", 135}};

// Returns the protocol number for a -p value, or -1.
int proto_number(std::string_view lowered) {
  uint32_t v = 0;
  if (parse_uint(lowered, 255, &v, 10)) return static_cast<int>(v);
  for (const auto& p : kProtos)
    if (lowered == p.name) return static_cast<int>(p.num);
  return -1;
}

// Module that -p loads implicitly for an unknown option.
const char* implicit_module(int proto, IPFamily family) {
  switch (proto) {
    case 6: return "tcp";
    case 17: return "udp";
    case 132: return "sctp";
    case 1: return family == IPFamily::V4 ? "icmp" : nullptr;
    case 58: return family == IPFamily::V6 ? "icmp6" : nullptr;
    default: return nullptr;
  }
}

// Addresses -------------------------------------------------------------------

// Parses "-s/-d" values: ADDR, ADDR/LEN, ADDR/DOTTED-MASK. Sets bare when no mask.
bool parse_address(std::string_view s, IPFamily family, CIDR* out, bool* bare) {
  size_t slash = s.find('/');
  std::string_view host = s.substr(0, slash);
  auto a = IPAddr::parse(host, /*sloppy=*/true);
  if (!a || a->family != family) return false;
  *bare = slash == std::string_view::npos;
  if (*bare) {
    *out = CIDR::host(*a);
    return true;
  }
  std::string_view m = s.substr(slash + 1);
  uint32_t len = 0;
  if (parse_uint(m, a->bit_length(), &len, 10)) {
    *out = CIDR{*a, static_cast<uint8_t>(len)};
    return true;
  }
  // Dotted / colon mask: only contiguous masks are representable.
  auto mask = IPAddr::parse(m, true);
  if (!mask || mask->family != family) return false;
  size_t bits = 0;
  bool zero_seen = false;
  for (size_t i = 0; i < a->bit_length(); ++i) {
    if (mask->bit(i)) {
      if (zero_seen) return false;
      ++bits;
    } else {
      zero_seen = true;
    }
  }
  *out = CIDR{*a, static_cast<uint8_t>(bits)};
  return true;
}

// Parser state for one line --------------------------------------------------

struct LoadedModule {
  size_t arg_index;        // index of the Module arg in rule.args
  const ModuleDef* def;    // nullptr: unmodelled module
  std::string name;
  std::vector<std::string_view> used;  // options already given (each once); views of the catalog's names
};

struct WordSpan {
  const Word* p;
  size_t n;
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
  const Word& operator[](size_t i) const { return p[i]; }
};

class LineParser {
 public:
  LineParser(WordSpan w, const ParseOptions& o, uint32_t line) : w_(w), opt_(o), line_(line) {}

  LineParse run();

 private:
  bool fail(std::string msg, size_t word, ParseErrorKind kind = ParseErrorKind::Parameter) {
    if (!err_) err_ = ParseError{kind, line_, word < w_.size() ? w_[word].col : 1, std::move(msg)};
    return false;
  }
  bool next_arg(size_t& i, const std::string& optname, std::string* out) {
    if (i + 1 >= w_.size()) return fail("option \"" + optname + "\" requires an argument", i);
    *out = w_[++i].text;
    return true;
  }
  bool intrapositioned(const std::string& v, size_t i) {
    if (v == "!")
      return fail("Using intrapositioned negation (`--option ! this`) is deprecated in favor of extrapositioned "
                  "(`! --option this`).",
                  i);
    return true;
  }
  bool set_command(OpKind k, char letter, size_t i);
  bool base_option(char letter, std::string value, size_t i);
  bool module_option(const std::string& name, size_t& i, const std::string& inline_value, bool has_inline);
  bool apply_module_option(LoadedModule& m, const OptDef& d, size_t& i, const std::string& optword,
                           const std::string& inline_value, bool has_inline);
  bool target_option(const std::string& name, size_t& i, const std::string& inline_value, bool has_inline);
  bool set_target(std::string name, bool is_goto, size_t i);
  bool finish();
  bool check_module(const LoadedModule& m);
  bool is_rule_command() const {
    return cmd_ == OpKind::Append || cmd_ == OpKind::Insert || cmd_ == OpKind::Delete || cmd_ == OpKind::Replace;
  }

  WordSpan w_;
  const ParseOptions& opt_;
  uint32_t line_;
  std::optional<ParseError> err_;

  bool have_cmd_ = false;
  char cmd_letter_ = 0;
  OpKind cmd_ = OpKind::Append;
  Op op_;
  Rule rule_;
  bool invert_ = false;
  size_t invert_word_ = 0;
  std::string base_seen_;   // letters of base options given: s d i o p f j
  int proto_ = -1;          // -p number (-1 none)
  bool proto_inv_ = false;
  std::vector<LoadedModule> mods_;
  bool target_set_ = false;
  size_t target_pos_ = 0;   // number of args when -j was seen (for unknown-option ownership)
  std::vector<std::string> target_used_;
  bool mark_op_set_ = false;
  std::string mark_op_name_;  // the MARK option given first (for the real tool's message)
  size_t unknown_ = 0;
  size_t rule_option_word_ = 0;
  bool have_rule_option_ = false;
};

bool LineParser::set_command(OpKind k, char letter, size_t i) {
  if (invert_) return fail("unexpected '!' flag", i);
  if (have_cmd_) return fail(std::string("Cannot use -") + letter + " with -" + cmd_letter_, i);
  have_cmd_ = true;
  cmd_ = k;
  cmd_letter_ = letter;
  op_.kind = k;
  return true;
}

bool LineParser::base_option(char letter, std::string value, size_t i) {
  // The real tool names the short option, whichever spelling was used ("multiple -s flags not allowed").
  if (base_seen_.find(letter) != std::string::npos)
    return fail(std::string("multiple -") + letter + " flags not allowed", i);
  base_seen_ += letter;
  if (!have_rule_option_) have_rule_option_ = true, rule_option_word_ = i;
  Arg a;
  a.neg = invert_;
  invert_ = false;
  switch (letter) {
    case 'p': {
      if (!intrapositioned(value, i)) return false;
      std::string l = lower(value);
      int n = proto_number(l);
      if (n < 0) return fail("unknown protocol \"" + value + "\" specified", i);
      if (n == 0 && a.neg) return fail("rule would never match protocol", i);
      a.kind = ArgKind::Proto;
      a.text = l;
      proto_ = n;
      proto_inv_ = a.neg;
      break;
    }
    case 's':
    case 'd': {
      if (!intrapositioned(value, i)) return false;
      if (value.find(',') != std::string::npos)
        return fail("address lists (" + value + ") expand to several rules: not modelled", i, ParseErrorKind::Unsupported);
      a.kind = letter == 's' ? ArgKind::Src : ArgKind::Dst;
      if (!parse_address(value, opt_.family, &a.cidr, &a.bare))
        return fail("host/network `" + value + "' not found", i);
      break;
    }
    case 'i':
    case 'o':
      if (!intrapositioned(value, i)) return false;
      if (value.size() > kMaxIfName)
        return fail("interface name `" + value + "' must be shorter than IFNAMSIZ (16)", i);
      a.kind = letter == 'i' ? ArgKind::InIface : ArgKind::OutIface;
      a.text = value;
      break;
    case 'f':
      a.kind = ArgKind::Fragment;
      break;
    default: return fail("internal: bad base option", i);
  }
  rule_.args.push_back(std::move(a));
  return true;
}

bool LineParser::set_target(std::string name, bool is_goto, size_t i) {
  if (invert_) return fail(std::string("cannot have ! before ") + (is_goto ? "-g" : "--jump"), i);
  if (base_seen_.find('j') != std::string::npos) return fail("multiple -j flags not allowed", i);
  base_seen_ += 'j';
  if (!have_rule_option_) have_rule_option_ = true, rule_option_word_ = i;
  if (name.empty()) return fail("Invalid target name (too short)", i);
  if (name.size() > kMaxChainName)
    return fail("Invalid target name `" + name + "' (" + std::to_string(kMaxChainName) + " chars max)", i);
  for (char c : name)
    if (std::isspace(static_cast<unsigned char>(c))) return fail("Invalid target name `" + name + "'", i);
  Target& t = rule_.target;
  target_set_ = true;
  target_pos_ = rule_.args.size();
  if (is_goto) {
    t.kind = TargetKind::Goto;
    t.chain = std::move(name);
    return true;
  }
  if (name == "ACCEPT") t.kind = TargetKind::Accept;
  else if (name == "DROP") t.kind = TargetKind::Drop;
  else if (name == "RETURN") t.kind = TargetKind::Return;
  else if (name == "REJECT") t.kind = TargetKind::Reject;
  else if (name == "DNAT") t.kind = TargetKind::DNAT;
  else if (name == "SNAT") t.kind = TargetKind::SNAT;
  else if (name == "MASQUERADE") t.kind = TargetKind::Masquerade;
  else if (name == "MARK") t.kind = TargetKind::Mark;
  else if (is_target_extension(name, opt_.family)) {
    t.kind = TargetKind::Other;
    ++unknown_;
  } else {
    t.kind = TargetKind::Jump;
  }
  t.chain = std::move(name);
  return true;
}

// NAT --to-destination / --to-source: ADDR[-ADDR][:PORT[-PORT]], [V6[-V6]]:PORT[-PORT],
// read as iptables 1.8.9's NAT extension reads it (checked against the real tool in a
// network namespace; tests/kernel/verifier_differential_test.cpp): the port part first,
// then the address part, each failure with the tool's own message. Ports are numbers as
// strtoul reads them (0x10, +5, 00), 0 included; service names are not modelled.
struct NatToError {
  std::string message;  ///< empty: parsed
  ParseErrorKind kind = ParseErrorKind::Parameter;
};

NatToError nat_port(std::string_view whole, std::string_view s, bool hi_part, uint32_t* out, std::string_view* rest) {
  auto bad = [&](std::string_view what) { return NatToError{"Port `" + std::string(what) + "' not valid"}; };
  std::string tmp(s);
  if (tmp.empty() || tmp[0] == '-' || std::isspace(static_cast<unsigned char>(tmp[0]))) return bad(hi_part ? s : whole);
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(tmp.c_str(), &end, 0);
  if (end == tmp.c_str()) {
    // Not a number: a service name of this machine's /etc/services, as the real tool
    // looks it up (the whole rest of the string: "x-5" is one name).
    if (const servent* se = ::getservbyname(tmp.c_str(), nullptr)) {
      *out = ntohs(static_cast<uint16_t>(se->s_port));
      *rest = {};
      return {};
    }
    return bad(hi_part ? s : whole);
  }
  if (errno || v > 65535) return bad(hi_part ? s : whole);
  *out = static_cast<uint32_t>(v);
  *rest = s.substr(static_cast<size_t>(end - tmp.c_str()));
  return {};
}

NatToError parse_nat_to(std::string_view s, IPFamily family, Target& t, bool* has_port, bool* range) {
  std::string_view addr = s, ports;
  bool colon = false;
  if (family == IPFamily::V6) {
    if (!s.empty() && s[0] == '[') {
      size_t close = s.find(']');
      if (close == std::string_view::npos) return {"Invalid address format"};
      addr = s.substr(1, close - 1);
      std::string_view rest = s.substr(close + 1);
      // After "]" only ":PORTS" means something; anything else is ignored.
      if (!rest.empty() && rest[0] == ':') {
        colon = true;
        ports = rest.substr(1);
      }
    } else if (s.size() >= 1 && s[0] == ':' && (s.size() < 2 || s[1] != ':')) {
      colon = true;  // ":PORTS" (but "::" is an address)
      addr = {};
      ports = s.substr(1);
    }
  } else {
    if (s.find('[') != std::string_view::npos) return {"Invalid address format"};
    size_t c = s.find(':');
    if (c != std::string_view::npos) {
      if (s.find(':', c + 1) != std::string_view::npos) return {"Bad IP address \"" + std::string(s) + "\""};
      colon = true;
      addr = s.substr(0, c);
      ports = s.substr(c + 1);
    }
  }
  if (colon) {
    *has_port = true;
    uint32_t lo = 0, hi = 0;
    std::string_view rest;
    if (auto e = nat_port(ports, ports, false, &lo, &rest); !e.message.empty()) return e;
    hi = lo;
    if (!rest.empty() && rest[0] == '-') {
      std::string_view second = rest.substr(1), after;
      if (auto e = nat_port(second, second, true, &hi, &after); !e.message.empty()) return e;
      if (!after.empty()) return {"Garbage after port value: `" + std::string(after) + "'"};
      if (hi < lo) return {"Port range `" + std::string(second) + "' funky"};
    } else if (!rest.empty()) {
      return {"Garbage after port value: `" + std::string(rest) + "'"};
    }
    t.to_port_lo = static_cast<uint16_t>(lo);
    t.to_port_hi = static_cast<uint16_t>(hi);
    t.to_port_zero = lo == 0;
  }
  if (addr.empty()) {
    if (colon) return {};  // ":PORT": ports only
    return {"Bad IP address \"\""};
  }
  size_t dash = addr.find('-');
  std::string_view first = addr.substr(0, dash);
  auto a = IPAddr::parse(first, true);
  if (!a || a->family != family) return {"Bad IP address \"" + std::string(first) + "\""};
  if (dash != std::string_view::npos) {
    std::string_view second = addr.substr(dash + 1);
    auto b = IPAddr::parse(second, true);
    if (!b || b->family != family) return {"Bad IP address \"" + std::string(second) + "\""};
    if (!(*a == *b)) {
      *range = true;
      return {};
    }
  }
  t.to_addr = *a;
  return {};
}

// A mark as xtables reads it (xtables_strtoui: strtoul base 0, no leading '-'):
// VALUE[/MASK] for --mark / --set-xmark / --set-mark, a plain VALUE for --and-mark,
// --or-mark, --xor-mark. Returns "" or the real tool's message for the option.
std::string read_mark(std::string_view s, const std::string& who, const std::string& optword, bool with_mask,
                      uint32_t* v, uint32_t* m) {
  auto number = [](const char* p, const char** end, uint32_t* out) {
    while (std::isspace(static_cast<unsigned char>(*p))) ++p;
    if (*p == '-') return false;
    char* e = nullptr;
    errno = 0;
    unsigned long long x = std::strtoull(p, &e, 0);
    if (e == p || errno == ERANGE || x > 0xFFFFFFFFull) return false;
    *out = static_cast<uint32_t>(x);
    *end = e;
    return true;
  };
  std::string tmp(s);
  const char* end = nullptr;
  if (!with_mask) {
    if (!number(tmp.c_str(), &end, v) || *end != '\0')
      return who + ": bad value for option \"" + optword + "\", or out of range (0-4294967295).\n";
    *m = 0xFFFFFFFFu;
    return "";
  }
  std::string bad = who + ": bad integer value for option \"" + optword + "\", or out of range.\n";
  if (!number(tmp.c_str(), &end, v)) return bad;
  *m = 0xFFFFFFFFu;
  if (*end == '/') {
    if (!number(end + 1, &end, m)) return bad;
  }
  if (*end != '\0') return who + ": trailing garbage after value for option \"" + optword + "\".\n";
  return "";
}

struct RejectName {
  const char* name;
  const char* alias;
};
constexpr RejectName kReject4[] = {
    {"icmp-net-unreachable", "net-unreach"},   {"icmp-host-unreachable", "host-unreach"},
    {"icmp-proto-unreachable", "proto-unreach"}, {"icmp-port-unreachable", "port-unreach"},
    {"icmp-net-prohibited", "net-prohib"},     {"icmp-host-prohibited", "host-prohib"},
    {"tcp-reset", "tcp-rst"},                  {"icmp-admin-prohibited", "admin-prohib"}};
constexpr RejectName kReject6[] = {
    {"icmp6-no-route", "no-route"},           {"icmp6-adm-prohibited", "adm-prohibited"},
    {"icmp6-addr-unreachable", "addr-unreach"}, {"icmp6-port-unreachable", "port-unreach"},
    {"tcp-reset", "tcp-rst"},                 {"icmp6-policy-fail", "policy-fail"},
    {"icmp6-reject-route", "reject-route"}};

bool LineParser::target_option(const std::string& name, size_t& i, const std::string& inline_value, bool has_inline) {
  Target& t = rule_.target;
  const auto* defs = target_opts(t.kind);
  const TOptDef* d = nullptr;
  if (defs)
    for (const auto& x : *defs)
      if (name == x.name) d = &x;
  if (!d) {
    if (t.kind != TargetKind::Other) return false;
    // Unmodelled target extension: keep its options as written (greedy arity).
    if (invert_) {
      t.other_args.push_back("!");
      invert_ = false;
    }
    t.other_args.push_back("--" + name);
    if (has_inline) t.other_args.push_back(inline_value);
    while (!has_inline && i + 1 < w_.size() && w_[i + 1].text.size() > 0 && w_[i + 1].text[0] != '-' &&
           w_[i + 1].text != "!")
      t.other_args.push_back(w_[++i].text);
    return true;
  }
  const std::string optword = "--" + name;
  if (invert_) return fail(t.chain + ": option \"" + optword + "\" cannot be inverted.", i);
  if (std::find(target_used_.begin(), target_used_.end(), name) != target_used_.end() &&
      !(t.kind == TargetKind::Mark))
    return fail(t.chain + ": option \"" + optword + "\" can only be used once.", i);
  target_used_.push_back(name);
  std::string v;
  if (d->nargs == 1) {
    if (has_inline) v = inline_value;
    else if (!next_arg(i, optword, &v)) return false;
  }
  switch (d->type) {
    case TOpt::ToDest:
    case TOpt::ToSource: {
      bool has_port = false, range = false;
      // The real tool asks for a port protocol as soon as it sees the port part.
      bool port_part = opt_.family == IPFamily::V6
                           ? v.find("]:") != std::string::npos || (!v.empty() && v[0] == ':' && v.rfind("::", 0) != 0)
                           : v.find(':') != std::string::npos && v.find('[') == std::string::npos;
      if (port_part && !(proto_ == 6 || proto_ == 17 || proto_ == 132 || proto_ == 33 || proto_ == 136))
        return fail("Need TCP, UDP, SCTP or DCCP with port specification", i);
      NatToError e = parse_nat_to(v, opt_.family, t, &has_port, &range);
      if (!e.message.empty()) return fail(e.message, i, e.kind);
      if (range)
        return fail("address ranges in " + optword + " are not modelled", i, ParseErrorKind::Unsupported);
      return true;
    }
    case TOpt::ToPorts: {
      size_t dash = v.find('-');
      uint32_t lo = 0, hi = 0;
      if (!parse_port(std::string_view(v).substr(0, dash), &lo) ||
          (dash != std::string::npos && !parse_port(std::string_view(v).substr(dash + 1), &hi)))
        return fail("Port \"" + v + "\" not valid", i);
      if (!(proto_ == 6 || proto_ == 17 || proto_ == 132 || proto_ == 33 || proto_ == 136))
        return fail("Need TCP, UDP, SCTP or DCCP with port specification", i);
      t.to_ports = dash == std::string::npos || lo == hi ? std::to_string(lo)
                                                         : std::to_string(lo) + "-" + std::to_string(hi);
      return true;
    }
    case TOpt::Random: t.random = true; return true;
    case TOpt::RandomFully: t.random_fully = true; return true;
    case TOpt::Persistent: t.persistent = true; return true;
    case TOpt::RejectWith: {
      bool found = false;
      auto check = [&](const auto& table) {
        for (const auto& r : table)
          if (v == r.name || v == r.alias) t.reject_with = r.name, found = true;
      };
      if (opt_.family == IPFamily::V4) check(kReject4);
      else check(kReject6);
      if (!found) return fail("unknown reject type \"" + v + "\"", i);
      return true;
    }
    default: {
      // libxt_MARK (revision 2) declares the five as mutually exclusive options.
      if (mark_op_set_)
        return fail("MARK: option \"" + optword + "\" " +
                        (mark_op_name_ == name ? std::string("can only be used once.")
                                               : "cannot be used together with \"--" + mark_op_name_ + "\"."),
                    i);
      mark_op_set_ = true;
      mark_op_name_ = name;
      uint32_t val = 0, mask = 0;
      bool allow_mask = d->type == TOpt::SetXMark || d->type == TOpt::SetMark;
      if (std::string e = read_mark(v, "MARK", optword, allow_mask, &val, &mask); !e.empty()) return fail(e, i);
      switch (d->type) {
        case TOpt::SetXMark: t.mark_op = ir::MarkOp::SetXMark; t.mark_value = val; t.mark_mask = mask; break;
        case TOpt::SetMark: t.mark_op = ir::MarkOp::SetMark; t.mark_value = val; t.mark_mask = val | mask; break;
        case TOpt::AndMark: t.mark_op = ir::MarkOp::AndMark; t.mark_value = 0; t.mark_mask = ~val; break;
        case TOpt::OrMark: t.mark_op = ir::MarkOp::OrMark; t.mark_value = val; t.mark_mask = val; break;
        case TOpt::XorMark: t.mark_op = ir::MarkOp::XorMark; t.mark_value = val; t.mark_mask = 0; break;
        default: break;
      }
      return true;
    }
  }
}

// addrtype names in kernel bit order (XT_ADDRTYPE_*).
constexpr const char* kAddrTypes[] = {"UNSPEC",    "UNICAST", "LOCAL",       "BROADCAST", "ANYCAST", "MULTICAST",
                                      "BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW",     "NAT",     "XRESOLVE"};

bool parse_addrtypes(std::string_view s, uint32_t* mask) {
  *mask = 0;
  if (s.empty()) return false;
  for (auto part : split(s, ',')) {
    bool found = false;
    for (size_t b = 0; b < std::size(kAddrTypes); ++b)
      if (iequals(part, kAddrTypes[b])) *mask |= 1u << b, found = true;
    if (!found) return false;
  }
  return true;
}

bool parse_ctstates(std::string_view s, bool conntrack, uint32_t* mask) {
  *mask = 0;
  if (s.empty()) return false;
  for (auto part : split(s, ',')) {
    std::string up(part);
    for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!conntrack && (up == "SNAT" || up == "DNAT")) return false;
    auto m = ir::parse_ctstate(up);
    if (!m || up.empty()) return false;
    *mask |= *m;
  }
  return true;
}

bool parse_multiports(std::string_view s, std::string* canon) {
  size_t count = 0;
  canon->clear();
  if (s.empty()) return false;
  for (auto part : split(s, ',')) {
    size_t colon = part.find(':');
    uint32_t lo = 0, hi = 0;
    if (!parse_port(part.substr(0, colon), &lo)) return false;
    count += 1;
    if (!canon->empty()) *canon += ',';
    *canon += std::to_string(lo);
    if (colon != std::string_view::npos) {
      if (!parse_port(part.substr(colon + 1), &hi) || lo > hi) return false;
      count += 1;
      *canon += ':' + std::to_string(hi);
    }
  }
  return count <= 15;
}

bool LineParser::apply_module_option(LoadedModule& m, const OptDef& d, size_t& i, const std::string& optword,
                                     const std::string& inline_value, bool has_inline) {
  const std::string ext = m.name;
  if (invert_ && !d.invert) return fail(ext + ": option \"" + optword + "\" cannot be inverted.", i);
  bool repeatable = d.type == OptType::Unknown;
  if (!repeatable && std::find(m.used.begin(), m.used.end(), std::string_view(d.name)) != m.used.end())
    return fail(ext + ": option \"" + optword + "\" can only be used once.", i);
  m.used.push_back(d.name);
  Arg a;
  a.neg = invert_;
  invert_ = false;
  std::string v, v2;
  if (d.nargs >= 1) {
    if (has_inline) v = inline_value;
    else if (!next_arg(i, optword, &v)) return false;
    if (!intrapositioned(v, i)) return false;
  }
  if (d.nargs == 2 && !next_arg(i, optword, &v2)) return false;
  auto bad = [&](const std::string& what) { return fail(ext + ": " + what, i); };
  switch (d.type) {
    case OptType::Comment:
      if (v.size() > 255) return bad("option \"--comment\" value \"" + v.substr(0, 20) + "...\" too long");
      a.kind = ArgKind::Comment;
      a.text = v;
      break;
    case OptType::SPort:
    case OptType::DPort: {
      a.kind = d.type == OptType::SPort ? ArgKind::SPort : ArgKind::DPort;
      size_t colon = v.find(':');
      uint32_t lo = 0, hi = 65535;
      std::string_view sv = v;
      if (colon == std::string::npos) {
        if (!parse_port(sv, &lo)) return fail("invalid port/service `" + v + "' specified", i);
        hi = lo;
      } else {
        if (colon > 0 && !parse_port(sv.substr(0, colon), &lo)) return fail("invalid port/service `" + v + "' specified", i);
        if (colon + 1 < v.size() && !parse_port(sv.substr(colon + 1), &hi))
          return fail("invalid port/service `" + v + "' specified", i);
        if (lo > hi) return fail("invalid portrange (min > max)", i);
      }
      a.value = lo;
      a.value2 = hi;
      break;
    }
    case OptType::SrcType:
    case OptType::DstType:
      a.kind = d.type == OptType::SrcType ? ArgKind::SrcType : ArgKind::DstType;
      if (!parse_addrtypes(v, &a.value)) return fail("addrtype: unknown type \"" + v + "\"", i);
      a.text = v;
      break;
    case OptType::LimitIn:
    case OptType::LimitOut: a.kind = d.type == OptType::LimitIn ? ArgKind::LimitIfaceIn : ArgKind::LimitIfaceOut; break;
    case OptType::CtState:
    case OptType::State:
      a.kind = ArgKind::CtState;
      if (!parse_ctstates(v, d.type == OptType::CtState, &a.value))
        return fail(std::string(d.type == OptType::CtState ? "Bad ctstate" : "Bad state") + " \"" + v + "\"", i);
      a.text2 = d.type == OptType::State ? "--state" : "";
      break;
    case OptType::Mark:
      a.kind = ArgKind::MarkMatch;
      if (std::string e = read_mark(v, "mark", optword, true, &a.value, &a.value2); !e.empty()) return fail(e, i);
      break;
    case OptType::StatMode:
      if (v != "random" && v != "nth") return bad("Bad mode \"" + v + "\"");
      a.kind = ArgKind::StatMode;
      a.text = v;
      break;
    case OptType::Probability: {
      a.kind = ArgKind::Probability;
      char* end = nullptr;
      double p = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(p >= 0.0 && p <= 1.0))
        return bad("--probability must be between 0 and 1");
      a.real = p;
      a.value = static_cast<uint32_t>(std::lround(2147483648.0 * p));
      break;
    }
    case OptType::Every:
    case OptType::Packet:
      a.kind = d.type == OptType::Every ? ArgKind::StatEvery : ArgKind::StatPacket;
      if (!parse_uint(v, 0xFFFFFFFFull, &a.value, 10)) return bad("Bad value \"" + v + "\"");
      if (d.type == OptType::Every && a.value == 0) return bad("--every must be greater than 0");
      break;
    case OptType::RecentCmd:
      for (const auto& u : m.used)
        if (&u != &m.used.back() && (u == "set" || u == "rcheck" || u == "update" || u == "remove"))
          return fail("recent: only one of `--set', `--rcheck' `--update' or `--remove' may be set", i);
      a.kind = ArgKind::RecentCmd;
      a.text = d.name;
      break;
    case OptType::Seconds:
    case OptType::Hitcount:
      a.kind = d.type == OptType::Seconds ? ArgKind::RecentSeconds : ArgKind::RecentHitcount;
      if (!parse_uint(v, 0xFFFFFFFFull, &a.value, 10)) return bad("Bad value \"" + v + "\"");
      break;
    case OptType::Reap: a.kind = ArgKind::RecentReap; break;
    case OptType::Rttl: a.kind = ArgKind::RecentRttl; break;
    case OptType::RecentName:
      if (v.empty() || v.size() > 199) return bad("bad --name \"" + v + "\"");
      a.kind = ArgKind::RecentName;
      a.text = v;
      break;
    case OptType::RecentMask: {
      auto addr = IPAddr::parse(v, true);
      if (!addr || addr->family != opt_.family) return fail("host/network `" + v + "' not found", i);
      a.kind = ArgKind::RecentMask;
      a.cidr = CIDR::host(*addr);
      break;
    }
    case OptType::RSide:
      for (const auto& u : m.used)
        if (&u != &m.used.back() && (u == "rsource" || u == "rdest"))
          return bad("option \"" + optword + "\" can only be used once.");
      a.kind = ArgKind::RecentSide;
      a.text = d.name;
      break;
    case OptType::Nfacct:
      if (v.empty() || v.size() > 31) return bad("bad --nfacct-name \"" + v + "\"");
      a.kind = ArgKind::NfacctName;
      a.text = v;
      break;
    case OptType::MatchSet: {
      a.kind = ArgKind::MatchSet;
      if (v.empty() || v.size() > 31) return fail("Setname is too long, max 31 characters", i);
      size_t dirs = 0;
      for (auto part : split(v2, ',')) {
        if (part != "src" && part != "dst") return fail("You must specify (the comma separated list of) 'src' or 'dst'", i);
        ++dirs;
      }
      if (dirs > 6) return fail("Can't be more src/dst options than 6", i);
      a.text = v;
      a.text2 = v2;
      break;
    }
    case OptType::MultiPorts: {
      a.kind = ArgKind::MultiPorts;
      a.text2 = d.canonical;
      if (!parse_multiports(v, &a.text)) return fail("invalid port/service `" + v + "' specified", i);
      break;
    }
    case OptType::PhysdevArg:
      if (v.size() > kMaxIfName) return bad("interface name too long");
      a.kind = ArgKind::Physdev;
      a.text2 = d.canonical;
      a.text = v;
      break;
    case OptType::PhysdevFlag:
      a.kind = ArgKind::Physdev;
      a.text2 = d.canonical;
      break;
    case OptType::Unknown:
      a.kind = ArgKind::Unknown;
      a.text2 = optword;
      a.text = d.nargs == 2 ? v + " " + v2 : v;
      break;
  }
  rule_.args.push_back(std::move(a));
  return true;
}

bool LineParser::module_option(const std::string& name, size_t& i, const std::string& inline_value, bool has_inline) {
  const std::string optword = "--" + name;
  // Latest loaded module (or target, if loaded after it) that knows the option.
  for (size_t k = mods_.size(); k-- > 0;) {
    LoadedModule& m = mods_[k];
    bool target_later = target_set_ && target_pos_ > m.arg_index;
    if (target_later) {
      const auto* defs = target_opts(rule_.target.kind);
      if (defs)
        for (const auto& d : *defs)
          if (name == d.name) return target_option(name, i, inline_value, has_inline);
    }
    if (m.def) {
      if (const OptDef* d = find_opt(*m.def, name)) return apply_module_option(m, *d, i, optword, inline_value, has_inline);
      continue;
    }
    // Unmodelled module: it owns any option after it (greedy arity) unless a target came later.
    if (target_later && rule_.target.kind == TargetKind::Other) break;
    Arg a;
    a.kind = ArgKind::Unknown;
    a.neg = invert_;
    invert_ = false;
    a.text2 = optword;
    if (has_inline) a.text = inline_value;
    while (!has_inline && i + 1 < w_.size() && !w_[i + 1].text.empty() && w_[i + 1].text[0] != '-' &&
           w_[i + 1].text != "!") {
      if (!a.text.empty()) a.text += ' ';
      a.text += w_[++i].text;
    }
    ++unknown_;
    rule_.args.push_back(std::move(a));
    return true;
  }
  if (target_set_ && target_option(name, i, inline_value, has_inline)) return true;
  if (err_) return false;
  // Implicit protocol module.
  if (proto_ > 0 && !proto_inv_) {
    if (const char* mod = implicit_module(proto_, opt_.family)) {
      bool loaded = false;
      for (const auto& m : mods_)
        if (m.name == mod) loaded = true;
      const ModuleDef* def = find_module(mod);
      if (!loaded && def && find_opt(*def, name)) {
        Arg m;
        m.kind = ArgKind::Module;
        m.implicit = true;
        m.text = mod;
        rule_.args.push_back(m);
        mods_.push_back({rule_.args.size() - 1, def, mod, {}});
        mods_.back().used.reserve(4);
        return apply_module_option(mods_.back(), *find_opt(*def, name), i, optword, inline_value, has_inline);
      }
    }
  }
  return fail("unknown option \"" + optword + "\"", i);
}

bool LineParser::check_module(const LoadedModule& m) {
  auto has = [&](const char* o) { return std::find(m.used.begin(), m.used.end(), std::string_view(o)) != m.used.end(); };
  auto line_fail = [&](const std::string& msg) { return fail(msg, w_.empty() ? 0 : w_.size() - 1); };
  if (m.name == "comment" && !has("comment")) return line_fail("comment: option \"--comment\" must be specified");
  if (m.name == "mark" && !has("mark")) return line_fail("mark: option \"--mark\" must be specified");
  if (m.name == "state" && !has("state")) return line_fail("state: option \"--state\" must be specified");
  if (m.name == "nfacct" && !has("nfacct-name")) return line_fail("nfacct: option \"--nfacct-name\" must be specified");
  if (m.name == "set" && !has("match-set") && !has("set")) return line_fail("You must specify `--match-set' with proper arguments");
  if (m.name == "conntrack" && m.used.empty()) return line_fail("conntrack: At least one option is required");
  if (m.name == "addrtype" && !has("src-type") && !has("dst-type"))
    return line_fail("addrtype: you must specify --src-type or --dst-type");
  if (m.name == "addrtype" && has("limit-iface-in") && has("limit-iface-out"))
    return line_fail("addrtype: you can't specify both --limit-iface-in and --limit-iface-out");
  if (m.name == "statistic") {
    const Arg* mode = nullptr;
    for (size_t k = m.arg_index + 1; k < rule_.args.size() && rule_.args[k].kind != ArgKind::Module; ++k)
      if (rule_.args[k].kind == ArgKind::StatMode) mode = &rule_.args[k];
    if (!mode) return line_fail("statistic: option \"--mode\" must be specified");
    if (mode->text == "random" && (has("every") || has("packet")))
      return line_fail("statistic: --every and --packet can only be used in nth mode");
    if (mode->text == "nth" && has("probability")) return line_fail("statistic: --probability can only be used in random mode");
    if (mode->text == "nth" && !has("every")) return line_fail("statistic: option \"--every\" must be specified");
    if (mode->text == "nth") {
      uint32_t every = 0, packet = 0;
      for (size_t k = m.arg_index + 1; k < rule_.args.size() && rule_.args[k].kind != ArgKind::Module; ++k) {
        if (rule_.args[k].kind == ArgKind::StatEvery) every = rule_.args[k].value;
        if (rule_.args[k].kind == ArgKind::StatPacket) packet = rule_.args[k].value;
      }
      if (packet > every - 1) return line_fail("statistic: the --packet p must be 0 <= p <= n-1");
    }
  }
  if (m.name == "recent") {
    bool cmd = has("set") || has("rcheck") || has("update") || has("remove");
    if (!cmd) return line_fail("recent: you must specify one of `--set', `--rcheck' `--update' or `--remove'");
    if ((has("seconds") || has("hitcount") || has("rttl") || has("reap")) && (has("set") || has("remove")))
      return line_fail("recent: --seconds, --hitcount, --rttl and --reap are only valid with --rcheck or --update");
    if (has("reap") && !has("seconds")) return line_fail("recent: --reap requires --seconds");
  }
  if (m.name == "multiport") {
    bool ok = !proto_inv_ && (proto_ == 6 || proto_ == 17 || proto_ == 136 || proto_ == 132 || proto_ == 33);
    if (!ok) return line_fail("multiport needs `-p tcp', `-p udp', `-p udplite', `-p sctp' or `-p dccp'");
    int seen = 0;
    for (const auto& u : m.used) seen += u == "dports" || u == "sports" || u == "ports" || u == "destination-ports" || u == "source-ports";
    if (seen == 0) return line_fail("multiport expects an option");
    if (seen > 1) return line_fail("multiport can only have one option");
  }
  if (m.name == "physdev" && m.used.empty()) return line_fail("PHYSDEV: no physdev option specified");
  return true;
}

bool LineParser::finish() {
  if (invert_) return fail("unexpected '!' flag", invert_word_);
  if (!have_cmd_) return fail("no command specified", 0);
  if (op_.chain.size() > kMaxChainName)
    return fail("chain name `" + op_.chain + "' too long (must be under 29 chars)", 0);
  auto valid_chain_name = [&](const std::string& n) {
    if (n.size() > kMaxChainName) return fail("chain name `" + n + "' too long (must be under 29 chars)", 0);
    if (!n.empty() && (n[0] == '-' || n[0] == '!'))
      return fail(std::string("chain name not allowed to start with `") + n[0] + "'", 0);
    if (is_target_extension(n, opt_.family)) return fail("chain name may not clash with target name", 0);
    for (char c : n)
      if (std::isspace(static_cast<unsigned char>(c))) return fail("Invalid chain name `" + n + "'", 0);
    return true;
  };
  // do_command: "nat" is not for filtering (both -j DROP and -P CHAIN DROP).
  if (opt_.table == ir::TableId::Nat &&
      ((cmd_ == OpKind::Policy && op_.arg == "DROP") || (is_rule_command() && rule_.target.kind == TargetKind::Drop)))
    return fail("\nThe \"nat\" table is not intended for filtering, the use of DROP is therefore inhibited.\n\n", 0);
  if (cmd_ == OpKind::NewChain && !valid_chain_name(op_.chain)) return false;
  if (cmd_ == OpKind::Rename && !valid_chain_name(op_.arg)) return false;
  if (!is_rule_command() && have_rule_option_) {
    const char letter = base_seen_.empty() ? 's' : base_seen_[0];
    const char* name = letter == 's' ? "--source" : letter == 'd' ? "--destination" : letter == 'p' ? "--protocol"
                     : letter == 'i' ? "--in-interface" : letter == 'o' ? "--out-interface" : letter == 'f' ? "--fragments"
                                                                                                             : "--jump";
    return fail(std::string("Illegal option `") + name + "' with this command", rule_option_word_);
  }
  if (is_rule_command()) {
    bool has_in = false, has_out = false;
    for (const auto& a : rule_.args) {
      has_in |= a.kind == ArgKind::InIface;
      has_out |= a.kind == ArgKind::OutIface;
    }
    if (has_out && (op_.chain == "PREROUTING" || op_.chain == "INPUT"))
      return fail("Can't use -o with " + op_.chain + "\n", 0);
    if (has_in && (op_.chain == "POSTROUTING" || op_.chain == "OUTPUT"))
      return fail("Can't use -i with " + op_.chain + "\n", 0);
    for (const auto& m : mods_)
      if (m.def && !check_module(m)) return false;
    const Target& t = rule_.target;
    if (t.kind == TargetKind::Mark && !mark_op_set_)
      return fail("MARK target: Parameter --set/and/or/xor-mark is required", w_.size() - 1);
    if ((t.kind == TargetKind::DNAT || t.kind == TargetKind::SNAT) && !t.to_addr && !t.to_port_lo && !t.to_port_zero)
      return fail(std::string(t.kind == TargetKind::DNAT ? "DNAT" : "SNAT") + ": option \"" +
                      (t.kind == TargetKind::DNAT ? "--to-destination" : "--to-source") + "\" must be specified",
                  w_.size() - 1);
    op_.rule = std::move(rule_);
  }
  return true;
}

LineParse LineParser::run() {
  LineParse out;
  rule_.args.reserve(8);
  mods_.reserve(4);
  for (size_t i = 0; i < w_.size() && !err_; ++i) {
    const std::string& t = w_[i].text;
    if (t == "!") {
      if (invert_) {
        fail("multiple `!' flags not allowed", i);
        break;
      }
      invert_ = true;
      invert_word_ = i;
      continue;
    }
    if (t.size() < 2 || t[0] != '-') {
      fail("Bad argument `" + t + "'", i);
      break;
    }
    std::string name;  // long name without "--", or one letter
    std::string inline_value;
    bool has_inline = false;
    char letter = 0;
    if (t[1] == '-') {
      name = t.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name.resize(eq);
        has_inline = true;
      }
      static constexpr std::pair<std::string_view, char> longs[] = {
          {"append", 'A'},      {"delete", 'D'},      {"insert", 'I'},       {"replace", 'R'},    {"check", 'C'},
          {"list", 'L'},        {"list-rules", 'S'},  {"flush", 'F'},        {"zero", 'Z'},       {"new-chain", 'N'},
          {"delete-chain", 'X'}, {"rename-chain", 'E'}, {"policy", 'P'},     {"protocol", 'p'},   {"source", 's'},
          {"src", 's'},         {"destination", 'd'}, {"dst", 'd'},          {"in-interface", 'i'}, {"out-interface", 'o'},
          {"fragment", 'f'},    {"fragments", 'f'},   {"match", 'm'},        {"jump", 'j'},       {"goto", 'g'},
          {"set-counters", 'c'}, {"verbose", 'v'},    {"table", 't'},        {"ipv4", '4'},       {"ipv6", '6'}};
      for (const auto& [ln, l] : longs)
        if (name == ln) letter = l;
    } else {
      letter = t[1];
      if (t.size() > 2) {
        inline_value = t.substr(2);
        has_inline = true;
      }
    }
    auto value = [&](std::string* v) -> bool {
      if (has_inline) {
        *v = inline_value;
        return true;
      }
      return next_arg(i, t, v);
    };
    // Optional argument (-F/-X/-Z [chain]): the next word unless it starts with '-' or '!'.
    auto optional_value = [&](std::string* v) -> bool {
      if (has_inline) {
        *v = inline_value;
        return true;
      }
      if (i + 1 < w_.size() && !w_[i + 1].text.empty() && w_[i + 1].text[0] != '-' && w_[i + 1].text[0] != '!') {
        *v = w_[++i].text;
        return true;
      }
      return false;
    };
    auto rulenum = [&](bool required, const char* cmd) -> bool {
      std::string n;
      if (i + 1 < w_.size() && !w_[i + 1].text.empty() && w_[i + 1].text[0] != '-' && w_[i + 1].text[0] != '!') {
        n = w_[++i].text;
        uint32_t v = 0;
        if (!parse_uint(n, 0x7FFFFFFF, &v, 10) || v == 0) return fail("Invalid rule number `" + n + "'", i);
        op_.num = v;
        return true;
      }
      if (required) return fail(std::string("-") + cmd + " requires a rule number", i);
      return true;
    };
    if (t[1] == '-' && !letter) {
      if (!module_option(name, i, inline_value, has_inline)) {
        if (!err_) fail("unknown option \"" + t + "\"", i);
        break;
      }
      continue;
    }
    if (!std::strchr("ADIRCLSFZNXEPpsdiofmjgcvt46", letter) ||
        (t[1] != '-' && t.size() > 2 && !std::strchr("ADIRCLSFZNXEPpsdiojgmc", letter))) {
      fail("unknown option \"" + t + "\"", i);
      break;
    }
    std::string v;
    switch (letter) {
      case 'A':
        if (!set_command(OpKind::Append, 'A', i) || !value(&v)) break;
        op_.chain = v;
        break;
      case 'C': fail("-C (check) is not modelled", i, ParseErrorKind::Unsupported); break;
      case 'L':
      case 'S': fail(std::string("-") + letter + " (list) is not modelled", i, ParseErrorKind::Unsupported); break;
      case 'D':
        if (!set_command(OpKind::Delete, 'D', i) || !value(&v)) break;
        op_.chain = v;
        if (i + 1 < w_.size() && !w_[i + 1].text.empty() && w_[i + 1].text[0] != '-' && w_[i + 1].text[0] != '!') {
          if (!rulenum(false, "D")) break;
          op_.kind = cmd_ = OpKind::DeleteNum;
        }
        break;
      case 'I':
        if (!set_command(OpKind::Insert, 'I', i) || !value(&v)) break;
        op_.chain = v;
        rulenum(false, "I");
        break;
      case 'R':
        if (!set_command(OpKind::Replace, 'R', i) || !value(&v)) break;
        op_.chain = v;
        rulenum(true, "R");
        break;
      case 'F':
      case 'X':
      case 'Z': {
        OpKind k = letter == 'F' ? OpKind::Flush : letter == 'X' ? OpKind::DeleteChain : OpKind::Zero;
        if (!set_command(k, letter, i)) break;
        if (optional_value(&v)) {
          op_.chain = v;
          if (letter == 'Z') rulenum(false, "Z");
        }
        break;
      }
      case 'N':
        if (!set_command(OpKind::NewChain, 'N', i) || !value(&v)) break;
        op_.chain = v;
        break;
      case 'E': {
        if (!set_command(OpKind::Rename, 'E', i) || !value(&v)) break;
        op_.chain = v;
        if (i + 1 < w_.size() && !w_[i + 1].text.empty() && w_[i + 1].text[0] != '-' && w_[i + 1].text[0] != '!')
          op_.arg = w_[++i].text;
        else
          fail("-E requires old-chain-name and new-chain-name", i);
        break;
      }
      case 'P':
        if (!set_command(OpKind::Policy, 'P', i) || !value(&v)) break;
        op_.chain = v;
        if (i + 1 < w_.size() && !w_[i + 1].text.empty() && w_[i + 1].text[0] != '-' && w_[i + 1].text[0] != '!')
          op_.arg = w_[++i].text;
        else
          fail("-P requires a chain and a policy", i);
        break;
      case 'p':
      case 's':
      case 'd':
      case 'i':
      case 'o': {
        size_t opt_word = i;
        if (!value(&v)) break;
        base_option(letter, v, opt_word);
        break;
      }
      case 'f':
        if (opt_.family == IPFamily::V6) {
          fail("unknown option \"" + t + "\"", i);
          break;
        }
        base_option('f', "", i);
        break;
      case 'm': {
        if (invert_) {
          fail("unexpected ! flag before --match", i);
          break;
        }
        if (!value(&v)) break;
        // xtables_find_match: the name's length first, then the extension must exist
        // (finding V1: any name used to be accepted and kept as an unmodelled module).
        if (v.size() > kMaxChainName) {
          fail("Invalid match name \"" + v + "\" (" + std::to_string(kMaxChainName) + " chars max)", i);
          break;
        }
        // libxtables' one alias: "icmpv6" and "ipv6-icmp" load icmp6 (also in its messages).
        if (v == "icmpv6" || v == "ipv6-icmp") v = "icmp6";
        if (!is_match_extension(v, opt_.family)) {
          fail("Couldn't load match `" + v + "':No such file or directory\n", i);
          break;
        }
        Arg a;
        a.kind = ArgKind::Module;
        a.text = v;
        rule_.args.push_back(a);
        const ModuleDef* def = find_module(v);
        if (!def) ++unknown_;
        mods_.push_back({rule_.args.size() - 1, def, v, {}});
        mods_.back().used.reserve(4);
        break;
      }
      case 'j':
      case 'g':
        if (!value(&v)) break;
        set_target(v, letter == 'g', i);
        break;
      case 'c': {
        if (!value(&v)) break;
        if (v.find(':') == std::string::npos && i + 1 < w_.size()) ++i;  // "-c PKTS BYTES"
        break;
      }
      case 'v':
      case '4': break;
      case '6':
        if (opt_.family == IPFamily::V4) fail("This is the IPv4 version of iptables.", i);
        break;
      case 't': fail("The -t option cannot be used in iptables-restore.", i); break;
      default: fail("unknown option \"" + t + "\"", i); break;
    }
  }
  if (!err_) finish();
  out.unknown_args = unknown_;
  if (err_) out.error = std::move(err_);
  else out.op = std::move(op_);
  return out;
}

}  // namespace

bool is_target_extension(std::string_view name, IPFamily family) {
  return listed(kTargetsBoth, name) || (family == IPFamily::V4 ? listed(kTargets4, name) : listed(kTargets6, name));
}

bool is_target_extension(std::string_view name) {
  return is_target_extension(name, IPFamily::V4) || is_target_extension(name, IPFamily::V6);
}

bool is_match_extension(std::string_view name, IPFamily family) {
  return listed(kMatchesBoth, name) || (family == IPFamily::V4 ? listed(kMatches4, name) : listed(kMatches6, name));
}

LineParse parse_command(const std::vector<Word>& words, const ParseOptions& options, uint32_t line) {
  return parse_command(words.data(), words.size(), options, line);
}

LineParse parse_command(const Word* words, size_t count, const ParseOptions& options, uint32_t line) {
  LineParser p(WordSpan{words, count}, options, line);
  LineParse r = p.run();
  if (r.op) r.op->line = line;
  return r;
}

std::optional<ir::Rule> parse_rule_text(std::string_view text, IPFamily family, std::string* chain, std::string* error) {
  auto words = split_words(text);
  ParseOptions o;
  o.family = family;
  auto r = parse_command(words, o, 1);
  if (r.error || !r.op || r.op->kind != OpKind::Append) {
    if (error) *error = r.error ? r.error->message : "not an -A line";
    return std::nullopt;
  }
  if (chain) *chain = r.op->chain;
  return std::move(r.op->rule);
}

std::vector<KnownOption> known_options() {
  std::vector<KnownOption> out;
  for (std::string_view b : {"-s", "-d", "-p", "-i", "-o", "-f"}) out.push_back({"", b, false});
  for (const auto& m : modules())
    for (const auto& o : m.opts) out.push_back({m.name, o.name, false});
  for (auto [kind, name] : {std::pair{TargetKind::DNAT, "DNAT"}, std::pair{TargetKind::SNAT, "SNAT"},
                            std::pair{TargetKind::Masquerade, "MASQUERADE"}, std::pair{TargetKind::Reject, "REJECT"},
                            std::pair{TargetKind::Mark, "MARK"}})
    for (const auto& o : *target_opts(kind)) out.push_back({name, o.name, true});
  return out;
}

std::vector<std::string_view> target_extension_names() {
  std::vector<std::string_view> out;
  for (auto n : kTargetsBoth) out.push_back(n);
  for (auto n : kTargets4) out.push_back(n);
  for (auto n : kTargets6) out.push_back(n);
  return out;
}

}  // namespace kpc::verifier
