// The encoder of applier/node/nft_netlink_encode.h. Every encoding here was read off what nft 1.0.6
// (libnftnl 1.2.4) sends for the same line (`strace -e write=all nft -f`, decoded), and the kernel
// tests compare the listings and the bytecode of both ways for every golden program. Each
// statement below says what nft does with it; whatever this file does not recognise throws
// Unsupported and the program goes to libnftables instead.
#include "applier/node/nft_netlink_encode.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/flowtable.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <net/if.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <memory>
#include <set>

namespace kpc::applier::nftnl {
namespace {

// nft's datatype ids (src/datatype.h, enum datatypes) and byte orders (enum byteorder).
constexpr uint32_t kTypeInteger = 4, kTypeIpv4 = 7, kTypeIpv6 = 8, kTypeProto = 12, kTypeService = 13;
constexpr uint32_t kHostOrder = 1, kBigEndian = 2;
// nft's expression types as written in set userdata (enum expr_types).
constexpr uint32_t kExprVerdict = 1, kExprPayload = 7, kExprConcat = 13;
// The userdata nft keeps for a payload key (proto_desc ids and template indexes of ip/ip6).
constexpr uint32_t kDescIp = 12, kDescIp6 = 13;
constexpr uint32_t kTmplIpSaddr = 11, kTmplIpDaddr = 12, kTmplIp6Saddr = 8, kTmplIp6Daddr = 9;

struct Unsupported {
  std::string why;
};
[[noreturn]] void unsupported(std::string why) { throw Unsupported{std::move(why)}; }

// ------------------------------------------------------------------ tokens
// A line split at single spaces; a double-quoted string is one token (kept with its quotes).
std::vector<std::string_view> tokenize(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    char c = line[i];
    if (c == ' ') {
      ++i;
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      unsupported("a control or non-ASCII character");
    size_t start = i;
    if (c == '"') {
      size_t end = line.find('"', i + 1);
      if (end == std::string_view::npos) unsupported("an unterminated string");
      i = end + 1;
      if (i < line.size() && line[i] != ' ') unsupported("text after a string");
    } else {
      while (i < line.size() && line[i] != ' ') {
        if (line[i] == '"') unsupported("a quote inside a word");
        ++i;
      }
    }
    out.push_back(line.substr(start, i - start));
  }
  return out;
}

// A comment: printable ASCII, no quote or backslash (nft's scanner has no escapes; kpc's
// comments are names and kube-proxy's fixed words), at most NFTNL_UDATA_COMMENT_MAXLEN.
std::string comment_text(std::string_view tok) {
  if (tok.size() < 2 || tok.front() != '"' || tok.back() != '"') unsupported("a comment that is not a string");
  std::string_view s = tok.substr(1, tok.size() - 2);
  if (s.find('\\') != std::string_view::npos) unsupported("an escape in a comment");
  if (s.size() > NFTNL_UDATA_COMMENT_MAXLEN) unsupported("a comment longer than nft allows");
  return std::string(s);
}

// Object names kpc writes: a letter, then letters, digits and / - _ . (nft's string token);
// at most 255 bytes (the kernel's NFT_*_MAXNAMELEN with its NUL).
std::string object_name(std::string_view tok) {
  if (tok.empty() || tok.size() > 255) unsupported("a name of that length");
  if (!std::isalpha(static_cast<unsigned char>(tok[0]))) unsupported("a name not starting with a letter: " + std::string(tok));
  for (char c : tok)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '-' || c == '_' || c == '.'))
      unsupported("a name with '" + std::string(1, c) + "'");
  return std::string(tok);
}

bool is_number(std::string_view s) {
  if (s.empty() || s.size() > 10) return false;
  if (s.size() > 1 && s[0] == '0') return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
uint64_t number(std::string_view s, uint64_t max) {
  if (!is_number(s)) unsupported("not a plain number: " + std::string(s));
  uint64_t v = 0;
  for (char c : s) v = v * 10 + static_cast<uint64_t>(c - '0');
  if (v > max) unsupported("a number out of range: " + std::string(s));
  return v;
}
// 0x and exactly 8 hex digits (kpc's marks: Go's %#08x).
uint32_t hex32(std::string_view s) {
  if (s.size() != 10 || s[0] != '0' || s[1] != 'x') unsupported("a mark that is not 0x + 8 digits: " + std::string(s));
  uint32_t v = 0;
  for (char c : s.substr(2)) {
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) unsupported("a mark that is not lower-case hex: " + std::string(s));
    v = v << 4 | static_cast<uint32_t>(d);
  }
  return v;
}

// ------------------------------------------------------------------ values
struct Addr {
  bool v6 = false;
  std::array<uint8_t, 16> b{};
  size_t len() const { return v6 ? 16 : 4; }
};

// An address exactly as inet_ntop prints it (so no spelling nft might read differently).
Addr address(std::string_view s, bool v6) {
  Addr a;
  a.v6 = v6;
  std::string z(s);
  if (inet_pton(v6 ? AF_INET6 : AF_INET, z.c_str(), a.b.data()) != 1) unsupported("not an address: " + z);
  char back[INET6_ADDRSTRLEN];
  if (!inet_ntop(v6 ? AF_INET6 : AF_INET, a.b.data(), back, sizeof back) || z != back)
    unsupported("an address in a spelling other than inet_ntop's: " + z);
  return a;
}

struct Prefix {
  Addr addr;
  unsigned len = 0;  ///< bits
  bool explicit_len = false;
};

// "A" or "A/N" with the host bits zero.
Prefix prefix(std::string_view s, bool v6) {
  Prefix p;
  size_t slash = s.find('/');
  p.addr = address(s.substr(0, slash), v6);
  p.len = static_cast<unsigned>(p.addr.len() * 8);
  if (slash != std::string_view::npos) {
    p.len = static_cast<unsigned>(number(s.substr(slash + 1), p.addr.len() * 8));
    p.explicit_len = true;
  }
  for (unsigned bit = p.len; bit < p.addr.len() * 8; ++bit)
    if (p.addr.b[bit / 8] & (0x80 >> (bit % 8))) unsupported("a prefix with host bits set: " + std::string(s));
  return p;
}

uint8_t l4proto(std::string_view s) {
  if (s == "tcp") return IPPROTO_TCP;
  if (s == "udp") return IPPROTO_UDP;
  if (s == "sctp") return IPPROTO_SCTP;
  unsupported("a protocol kpc does not write: " + std::string(s));
}

// ------------------------------------------------------------------ libnftnl helpers
template <class T, void (*F)(const T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using Rule = std::unique_ptr<nftnl_rule, Free<nftnl_rule, nftnl_rule_free>>;
using Set = std::unique_ptr<nftnl_set, Free<nftnl_set, nftnl_set_free>>;
using Udata = std::unique_ptr<nftnl_udata_buf, Free<nftnl_udata_buf, nftnl_udata_buf_free>>;

Udata new_udata() {
  Udata u(nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN));
  if (!u) unsupported("out of memory");
  return u;
}

// nft's register numbers: 32-bit register units counted from NFT_REG_1, named by the 128-bit
// register when a value starts at one (netlink_put_register).
uint32_t reg_of_unit(uint32_t unit) { return unit % 4 == 0 ? NFT_REG_1 + unit / 4 : NFT_REG32_00 + unit; }

nftnl_expr* expr(const char* name) {
  nftnl_expr* e = nftnl_expr_alloc(name);
  if (!e) unsupported(std::string("libnftnl has no expression ") + name);
  return e;
}

void add_payload(nftnl_rule* r, uint32_t base, uint32_t offset, uint32_t len, uint32_t dreg) {
  nftnl_expr* e = expr("payload");
  nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
  nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
  nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
  nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
  nftnl_rule_add_expr(r, e);
}
void add_meta_load(nftnl_rule* r, uint32_t key, uint32_t dreg) {
  nftnl_expr* e = expr("meta");
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
  nftnl_rule_add_expr(r, e);
}
void add_cmp(nftnl_rule* r, uint32_t op, const void* data, uint32_t len) {
  nftnl_expr* e = expr("cmp");
  nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
  nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
  nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
  nftnl_rule_add_expr(r, e);
}
// with_op: nft writes NFTA_BITWISE_OP for a binary operation (`mark and X`, `meta mark | X`)
// and leaves it out for the masks it makes itself (flag tests, non-byte prefixes).
void add_bitwise(nftnl_rule* r, const void* mask, const void* xorv, uint32_t len, bool with_op) {
  nftnl_expr* e = expr("bitwise");
  nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
  nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
  if (with_op) nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_OP, NFT_BITWISE_BOOL);
  nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
  nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
  nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, xorv, len);
  nftnl_rule_add_expr(r, e);
}
void add_verdict(nftnl_rule* r, int32_t code, const std::string* chain) {
  nftnl_expr* e = expr("immediate");
  nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, static_cast<uint32_t>(code));
  if (chain) nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain->c_str());
  nftnl_rule_add_expr(r, e);
}
void add_immediate(nftnl_rule* r, uint32_t dreg, const void* data, uint32_t len) {
  nftnl_expr* e = expr("immediate");
  nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, dreg);
  nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, data, len);
  nftnl_rule_add_expr(r, e);
}
void add_lookup(nftnl_rule* r, uint32_t sreg, bool vmap, const std::string& set, uint32_t set_id, bool invert) {
  nftnl_expr* e = expr("lookup");
  nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
  if (vmap) nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set.c_str());
  nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
  if (invert) nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
  nftnl_rule_add_expr(r, e);
}

// A verdict text: drop, accept, return, jump C, goto C. Returns the tokens used.
size_t verdict_at(const std::vector<std::string_view>& t, size_t i, int32_t* code, std::string* chain) {
  if (i >= t.size()) unsupported("a missing verdict");
  if (t[i] == "drop") return *code = NF_DROP, 1;
  if (t[i] == "accept") return *code = NF_ACCEPT, 1;
  if (t[i] == "return") return *code = NFT_RETURN, 1;
  if ((t[i] == "jump" || t[i] == "goto") && i + 1 < t.size()) {
    *code = t[i] == "jump" ? NFT_JUMP : NFT_GOTO;
    *chain = object_name(t[i + 1]);
    return 2;
  }
  unsupported("a verdict kpc does not write: " + std::string(t[i]));
}

// ------------------------------------------------------------------ the program
struct Family {
  uint8_t nfproto;  // NFPROTO_IPV4 / IPV6 / INET
  const char* word;
};
Family family_of(std::string_view s) {
  if (s == "ip") return {NFPROTO_IPV4, "ip"};
  if (s == "ip6") return {NFPROTO_IPV6, "ip6"};
  if (s == "inet") return {NFPROTO_INET, "inet"};
  unsupported("a family kpc does not write: " + std::string(s));
}

uint32_t part_len(uint32_t type) {
  switch (type) {
    case kTypeIpv4: return 4;
    case kTypeIpv6: return 16;
    case kTypeProto: return 1;
    case kTypeService: return 2;
    case kTypeInteger: return 4;
    default: unsupported("a key type kpc does not write");
  }
}
uint32_t key_len_of(const std::vector<uint32_t>& parts) {
  if (parts.size() == 1) return part_len(parts[0]);
  uint32_t n = 0;
  for (uint32_t p : parts) n += (part_len(p) + 3) / 4 * 4;
  return n;
}
uint32_t key_type_of(const std::vector<uint32_t>& parts) {
  uint32_t t = 0;
  for (uint32_t p : parts) t = t << 6 | p;  // nft's concat_subtype_add (TYPE_BITS = 6)
  return t;
}

class Encoder {
 public:
  Encoder(const SetLookup& lookup, uint32_t first_seq) : lookup_(lookup), seq_(first_seq) {}

  EncodeResult run(std::string_view program) {
    EncodeResult res;
    out_.reserve(program.size() + program.size() / 2 + 4096);
    scratch_.resize(kScratch);
    // nft numbers the named sets of a run in its evaluation pass (1, 2, ... in program order)
    // and the anonymous ones later, as it writes the rules: their ids follow the named sets'.
    for (size_t pos = 0; pos < program.size();) {
      if (program.compare(pos, 8, "add set ") == 0 || program.compare(pos, 8, "add map ") == 0) ++named_sets_;
      size_t nl = program.find('\n', pos);
      pos = nl == std::string_view::npos ? program.size() : nl + 1;
    }
    next_anonymous_id_ = named_sets_ + 1;
    res.batch.first_seq = seq_;
    begin_message();
    nftnl_batch_begin(scratch_.data(), seq_++);
    end_message(0);
    size_t line_no = 0;
    try {
      for (size_t pos = 0; pos < program.size();) {
        size_t nl = program.find('\n', pos);
        if (nl == std::string_view::npos) nl = program.size();
        std::string_view line = program.substr(pos, nl - pos);
        pos = nl + 1;
        ++line_no;
        if (line.empty()) continue;
        if (line.size() > 65536) unsupported("a line longer than 64 KiB");
        line_ = static_cast<uint32_t>(line_no);
        encode_line(tokenize(line));
      }
    } catch (const Unsupported& u) {
      res.why = "line " + std::to_string(line_no) + ": " + u.why;
      return res;
    }
    flush_element_run();
    begin_message();
    nftnl_batch_end(scratch_.data(), seq_);
    end_message(0);
    res.batch.last_seq = seq_++;
    res.batch.messages = line_of_.size() - 2;
    res.batch.bytes = std::move(out_);
    res.batch.line_of = std::move(line_of_);
    res.declared = std::move(declared_);
    res.ok = true;
    return res;
  }

 private:
  static constexpr size_t kScratch = 1 << 20;

  // One message: built in the scratch buffer (libnftnl writes without bounds: a line is at
  // most 64 KiB, so its message is far below the scratch size), then appended.
  void begin_message() { std::memset(scratch_.data(), 0, 64); }
  void end_message(uint32_t line) {
    auto* nlh = reinterpret_cast<nlmsghdr*>(scratch_.data());
    if (nlh->nlmsg_len > kScratch) std::abort();  // cannot happen: see above
    out_.insert(out_.end(), scratch_.data(), scratch_.data() + MNL_ALIGN(nlh->nlmsg_len));
    line_of_.push_back(line);
  }
  nlmsghdr* header(uint16_t cmd, uint16_t flags) {
    begin_message();
    return nftnl_nlmsg_build_hdr(scratch_.data(), cmd, fam_.nfproto, flags, seq_++);
  }

  struct HeldElement {
    std::vector<char> msg;
    uint32_t line;
  };
  void flush_element_run() {
    if (!run_.empty()) std::reverse(run_.begin() + 1, run_.end());
    for (auto& h : run_) {
      reinterpret_cast<nlmsghdr*>(h.msg.data())->nlmsg_seq = seq_++;
      out_.insert(out_.end(), h.msg.begin(), h.msg.end());
      line_of_.push_back(h.line);
    }
    run_.clear();
    run_set_.clear();
  }

  // ---------------------------------------------------------------- lines
  void encode_line(const std::vector<std::string_view>& t) {
    if (t.size() < 4) unsupported("a line kpc does not write");
    const std::string_view verb = t[0], kind = t[1];
    // One table per program, as kpc writes them (declared sets are known by name within it).
    Family fam = family_of(t[2]);
    std::string table = object_name(t[3]);
    if (!table_.empty() && (fam.nfproto != fam_.nfproto || table != table_)) unsupported("a second table in one program");
    fam_ = fam;
    table_ = std::move(table);
    if (kind == "table") {
      flush_element_run();
      if (verb == "add") return add_table(t);
      if (verb == "delete" && t.size() == 4) return simple(NFT_MSG_DELTABLE, nullptr);
      unsupported("a table command kpc does not write");
    }
    if (t.size() < 5) unsupported("a line kpc does not write");
    std::string name = object_name(t[4]);
    if (!(verb == "add" && kind == "element" && name == run_set_)) flush_element_run();
    if (kind == "chain") {
      if (verb == "add") return add_chain(t, name);
      if (verb == "flush" && t.size() == 5) return simple(NFT_MSG_DELRULE, &name);
      if (verb == "delete" && t.size() == 5) return simple(NFT_MSG_DELCHAIN, &name);
    } else if (kind == "rule") {
      if (verb == "add") return add_rule(t, name);
    } else if (kind == "set" || kind == "map") {
      bool is_map = kind == "map";
      if (verb == "add") return add_set(t, name, is_map);
      if ((verb == "flush" || verb == "delete") && t.size() == 5) {
        const SetInfo& s = known_set(name);
        if (s.verdict_map != is_map) unsupported("a set named as a map or a map as a set");
        if (verb == "flush") return flush_set(name);
        declared_.erase(name);
        deleted_.insert(name);
        return simple(NFT_MSG_DELSET, &name);
      }
    } else if (kind == "element") {
      if (verb == "add" || verb == "delete") return element(t, name, verb == "add");
    } else if (kind == "flowtable") {
      if (verb == "add") return add_flowtable(t, name);
      if (verb == "delete" && t.size() == 5) return simple(NFT_MSG_DELFLOWTABLE, &name);
    }
    unsupported("a command kpc does not write: " + std::string(verb) + " " + std::string(kind));
  }

  // Messages of a table and at most a name: delete table, flush chain (DELRULE of the chain),
  // delete chain, delete set/map, delete flowtable.
  void simple(uint16_t cmd, const std::string* name) {
    nlmsghdr* nlh = header(cmd, 0);
    switch (cmd) {
      case NFT_MSG_DELTABLE: mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, table_.c_str()); break;
      case NFT_MSG_DELRULE: {
        std::unique_ptr<nftnl_rule, Free<nftnl_rule, nftnl_rule_free>> r(nftnl_rule_alloc());
        nftnl_rule_set_str(r.get(), NFTNL_RULE_TABLE, table_.c_str());
        nftnl_rule_set_str(r.get(), NFTNL_RULE_CHAIN, name->c_str());
        nftnl_rule_nlmsg_build_payload(nlh, r.get());
        break;
      }
      case NFT_MSG_DELCHAIN: {
        std::unique_ptr<nftnl_chain, Free<nftnl_chain, nftnl_chain_free>> c(nftnl_chain_alloc());
        nftnl_chain_set_str(c.get(), NFTNL_CHAIN_TABLE, table_.c_str());
        nftnl_chain_set_str(c.get(), NFTNL_CHAIN_NAME, name->c_str());
        nftnl_chain_nlmsg_build_payload(nlh, c.get());
        break;
      }
      case NFT_MSG_DELSET: {
        Set s(nftnl_set_alloc());
        nftnl_set_set_str(s.get(), NFTNL_SET_TABLE, table_.c_str());
        nftnl_set_set_str(s.get(), NFTNL_SET_NAME, name->c_str());
        nftnl_set_nlmsg_build_payload(nlh, s.get());
        break;
      }
      case NFT_MSG_DELFLOWTABLE: {
        std::unique_ptr<nftnl_flowtable, Free<nftnl_flowtable, nftnl_flowtable_free>> f(nftnl_flowtable_alloc());
        nftnl_flowtable_set_str(f.get(), NFTNL_FLOWTABLE_TABLE, table_.c_str());
        nftnl_flowtable_set_str(f.get(), NFTNL_FLOWTABLE_NAME, name->c_str());
        nftnl_flowtable_nlmsg_build_payload(nlh, f.get());
        break;
      }
      default: std::abort();
    }
    end_message(line_);
  }

  // add table FAM NAME [{ comment "C" ; }] -- NEWTABLE without NLM_F_CREATE, as nft sends it.
  void add_table(const std::vector<std::string_view>& t) {
    std::optional<std::string> comment;
    if (t.size() == 9 && t[4] == "{" && t[5] == "comment" && t[7] == ";" && t[8] == "}") comment = comment_text(t[6]);
    else if (t.size() != 4) unsupported("a table body kpc does not write");
    std::unique_ptr<nftnl_table, Free<nftnl_table, nftnl_table_free>> tb(nftnl_table_alloc());
    nftnl_table_set_str(tb.get(), NFTNL_TABLE_NAME, table_.c_str());
    nftnl_table_set_u32(tb.get(), NFTNL_TABLE_FLAGS, 0);
    Udata u;
    if (comment) {
      u = new_udata();
      nftnl_udata_put_strz(u.get(), NFTNL_UDATA_TABLE_COMMENT, comment->c_str());
      nftnl_table_set_data(tb.get(), NFTNL_TABLE_USERDATA, nftnl_udata_buf_data(u.get()), nftnl_udata_buf_len(u.get()));
    }
    nlmsghdr* nlh = header(NFT_MSG_NEWTABLE, 0);
    nftnl_table_nlmsg_build_payload(nlh, tb.get());
    end_message(line_);
  }

  // add chain FAM T NAME [{ [type X hook H priority P ;] [comment "C" ;] }]
  void add_chain(const std::vector<std::string_view>& t, const std::string& name) {
    std::unique_ptr<nftnl_chain, Free<nftnl_chain, nftnl_chain_free>> c(nftnl_chain_alloc());
    nftnl_chain_set_str(c.get(), NFTNL_CHAIN_TABLE, table_.c_str());
    nftnl_chain_set_str(c.get(), NFTNL_CHAIN_NAME, name.c_str());
    Udata u;
    std::optional<std::pair<uint32_t, int32_t>> base_hook;
    if (t.size() > 5) {
      if (t[5] != "{" || t.back() != "}") unsupported("a chain body kpc does not write");
      size_t i = 6, end = t.size() - 1;
      if (i < end && t[i] == "type") {
        if (i + 7 > end || t[i + 2] != "hook" || t[i + 4] != "priority" || t[i + 6] != ";")
          unsupported("a base chain spec kpc does not write");
        std::string_view type = t[i + 1], hook = t[i + 3], prio = t[i + 5];
        if (type != "filter" && type != "nat") unsupported("a chain type kpc does not write");
        if (fam_.nfproto == NFPROTO_INET && type == "nat") unsupported("a nat chain in an inet table");
        static constexpr std::pair<std::string_view, uint32_t> hooks[] = {
            {"prerouting", NF_INET_PRE_ROUTING}, {"input", NF_INET_LOCAL_IN}, {"forward", NF_INET_FORWARD},
            {"output", NF_INET_LOCAL_OUT}, {"postrouting", NF_INET_POST_ROUTING}};
        auto h = std::find_if(std::begin(hooks), std::end(hooks), [&](const auto& p) { return p.first == hook; });
        if (h == std::end(hooks)) unsupported("a hook kpc does not write");
        // knftables writes the priority as a number.
        bool neg = !prio.empty() && prio[0] == '-';
        int64_t p = static_cast<int64_t>(number(neg ? prio.substr(1) : prio, 1000));
        if (neg) p = -p;
        nftnl_chain_set_str(c.get(), NFTNL_CHAIN_TYPE, std::string(type).c_str());
        base_hook = std::make_pair(h->second, static_cast<int32_t>(p));
        i += 7;
      }
      if (i < end && t[i] == "comment") {
        if (i + 3 != end || t[i + 2] != ";") unsupported("a chain comment kpc does not write");
        u = new_udata();
        nftnl_udata_put_strz(u.get(), NFTNL_UDATA_CHAIN_COMMENT, comment_text(t[i + 1]).c_str());
        nftnl_chain_set_data(c.get(), NFTNL_CHAIN_USERDATA, nftnl_udata_buf_data(u.get()), nftnl_udata_buf_len(u.get()));
        i += 3;
      }
      if (i != end || t.size() == 7) unsupported("a chain body kpc does not write");
    }
    nlmsghdr* nlh = header(NFT_MSG_NEWCHAIN, NLM_F_CREATE);
    nftnl_chain_nlmsg_build_payload(nlh, c.get());
    if (base_hook) {
      // nft writes the hook after libnftnl's part of the message (mnl_nft_chain_add).
      nlattr* nest = mnl_attr_nest_start(nlh, NFTA_CHAIN_HOOK);
      mnl_attr_put_u32(nlh, NFTA_HOOK_HOOKNUM, htonl(base_hook->first));
      mnl_attr_put_u32(nlh, NFTA_HOOK_PRIORITY, htonl(static_cast<uint32_t>(base_hook->second)));
      mnl_attr_nest_end(nlh, nest);
    }
    end_message(line_);
  }

  // ---------------------------------------------------------------- sets
  // add set|map FAM T NAME { type K [: verdict] ; [flags dynamic,timeout ;] [timeout Ns ;] [comment "C" ;] }
  void add_set(const std::vector<std::string_view>& t, const std::string& name, bool is_map) {
    if (t.size() < 9 || t[5] != "{" || t[6] != "type" || t.back() != "}") unsupported("a set body kpc does not write");
    size_t i = 7, end = t.size() - 1;
    SetInfo s;
    for (;;) {
      if (i >= end) unsupported("a set type without ;");
      std::string_view w = t[i];
      if (w == "ipv4_addr") s.key_parts.push_back(kTypeIpv4);
      else if (w == "ipv6_addr") s.key_parts.push_back(kTypeIpv6);
      else if (w == "inet_proto") s.key_parts.push_back(kTypeProto);
      else if (w == "inet_service") s.key_parts.push_back(kTypeService);
      else unsupported("a key type kpc does not write: " + std::string(w));
      ++i;
      if (i < end && t[i] == ".") {
        ++i;
        continue;
      }
      break;
    }
    if (i + 1 < end && t[i] == ":") {
      if (t[i + 1] != "verdict") unsupported("a map that is not a verdict map");
      s.verdict_map = true;
      i += 2;
    }
    if (s.verdict_map != is_map) unsupported("a verdict map declared as a set, or a set as a map");
    if (i >= end || t[i] != ";") unsupported("a set type without ;");
    ++i;
    std::optional<uint64_t> timeout_ms;
    std::optional<std::string> comment;
    bool dynamic = false;
    if (i + 1 < end && t[i] == "flags") {
      if (t[i + 1] != "dynamic,timeout" || i + 2 >= end || t[i + 2] != ";") unsupported("set flags kpc does not write");
      dynamic = true;
      i += 3;
    }
    if (i + 1 < end && t[i] == "timeout") {
      std::string_view v = t[i + 1];
      if (v.size() < 2 || v.back() != 's' || i + 2 >= end || t[i + 2] != ";") unsupported("a set timeout kpc does not write");
      timeout_ms = number(v.substr(0, v.size() - 1), 1u << 30) * 1000;
      i += 3;
    }
    if (i + 1 < end && t[i] == "comment") {
      if (i + 2 >= end || t[i + 2] != ";") unsupported("a set comment kpc does not write");
      comment = comment_text(t[i + 1]);
      i += 3;
    }
    if (i != end) unsupported("a set body kpc does not write");
    const bool concat = s.key_parts.size() > 1;
    if (!concat && s.key_parts[0] != kTypeIpv4 && s.key_parts[0] != kTypeIpv6) unsupported("a single-part key kpc does not write");
    if (is_map && !concat) unsupported("a map with a single-part key");
    if (dynamic && (concat || is_map)) unsupported("a dynamic concatenated set or map");
    if (timeout_ms && !dynamic) unsupported("a timeout without flags dynamic,timeout");
    for (uint32_t p : s.key_parts)
      if ((p == kTypeIpv4 && fam_.nfproto == NFPROTO_IPV6) || (p == kTypeIpv6 && fam_.nfproto == NFPROTO_IPV4))
        unsupported("an address type of the other family");
    s.key_len = key_len_of(s.key_parts);
    s.flags = (is_map ? uint32_t{NFT_SET_MAP} : 0u) | (dynamic ? uint32_t{NFT_SET_TIMEOUT | NFT_SET_EVAL} : 0u);
    s.id = next_set_id_++;

    Set set(nftnl_set_alloc());
    nftnl_set_set_str(set.get(), NFTNL_SET_TABLE, table_.c_str());
    nftnl_set_set_str(set.get(), NFTNL_SET_NAME, name.c_str());
    nftnl_set_set_u32(set.get(), NFTNL_SET_FLAGS, s.flags);
    nftnl_set_set_u32(set.get(), NFTNL_SET_KEY_TYPE, key_type_of(s.key_parts));
    nftnl_set_set_u32(set.get(), NFTNL_SET_KEY_LEN, s.key_len);
    if (is_map) {
      nftnl_set_set_u32(set.get(), NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
      nftnl_set_set_u32(set.get(), NFTNL_SET_DATA_LEN, 0);
    }
    nftnl_set_set_u32(set.get(), NFTNL_SET_ID, s.id);
    if (timeout_ms) nftnl_set_set_u64(set.get(), NFTNL_SET_TIMEOUT, *timeout_ms);
    // nft's set userdata: the key's byte order (invalid, 0, for a concatenation, which then
    // carries its typeof expression: a concat with no data), a map's data byte order and
    // data-interval flag, then the comment.
    Udata u = new_udata();
    nftnl_udata_put_u32(u.get(), NFTNL_UDATA_SET_KEYBYTEORDER, concat ? 0 : kBigEndian);
    if (is_map) nftnl_udata_put_u32(u.get(), NFTNL_UDATA_SET_DATABYTEORDER, 0);
    if (concat) typeof_udata(u.get(), NFTNL_UDATA_SET_KEY_TYPEOF, kExprConcat, nullptr);
    if (is_map) nftnl_udata_put_u32(u.get(), NFTNL_UDATA_SET_DATA_INTERVAL, 0);
    if (comment) nftnl_udata_put_strz(u.get(), NFTNL_UDATA_SET_COMMENT, comment->c_str());
    nftnl_set_set_data(set.get(), NFTNL_SET_USERDATA, nftnl_udata_buf_data(u.get()), nftnl_udata_buf_len(u.get()));
    nlmsghdr* nlh = header(NFT_MSG_NEWSET, NLM_F_CREATE);
    nftnl_set_nlmsg_build_payload(nlh, set.get());
    end_message(line_);
    deleted_.erase(name);
    declared_[name] = std::move(s);
  }

  // A typeof TLV: the expression type and a nest of its data (a payload's desc and template).
  static void typeof_udata(nftnl_udata_buf* u, uint8_t type, uint32_t expr_type, const std::pair<uint32_t, uint32_t>* payload) {
    nftnl_udata* nest = nftnl_udata_nest_start(u, type);
    nftnl_udata_put_u32(u, NFTNL_UDATA_SET_TYPEOF_EXPR, expr_type);
    nftnl_udata* data = nftnl_udata_nest_start(u, NFTNL_UDATA_SET_TYPEOF_DATA);
    if (payload) {
      nftnl_udata_put_u32(u, 0, payload->first);   // NFTNL_UDATA_SET_KEY_PAYLOAD_DESC
      nftnl_udata_put_u32(u, 1, payload->second);  // NFTNL_UDATA_SET_KEY_PAYLOAD_TYPE
    }
    nftnl_udata_nest_end(u, data);
    nftnl_udata_nest_end(u, nest);
  }

  // A set the program declared, or the kernel's (asked once per name).
  const SetInfo& known_set(const std::string& name) {
    if (auto it = declared_.find(name); it != declared_.end()) return it->second;
    if (deleted_.count(name)) unsupported("a set used after its deletion: " + name);
    std::string key = std::to_string(fam_.nfproto) + " " + table_ + " " + name;
    if (auto it = from_kernel_.find(key); it != from_kernel_.end()) return it->second;
    std::optional<SetInfo> s = lookup_ ? lookup_(fam_.nfproto, table_, name) : std::nullopt;
    if (!s) unsupported("set " + name + " is neither declared by the program nor in the kernel");
    for (uint32_t p : s->key_parts) part_len(p);  // a key type the encoder knows
    if (s->key_parts.empty() || key_len_of(s->key_parts) != s->key_len) unsupported("set " + name + " has a key kpc does not write");
    return from_kernel_.emplace(key, std::move(*s)).first->second;
  }

  // flush set|map: DELSETELEM without elements, built by libnftnl (set name, then table), as
  // nft's mnl_nft_setelem_flush does.
  void flush_set(const std::string& name) {
    Set s(nftnl_set_alloc());
    nftnl_set_set_str(s.get(), NFTNL_SET_TABLE, table_.c_str());
    nftnl_set_set_str(s.get(), NFTNL_SET_NAME, name.c_str());
    nlmsghdr* nlh = header(NFT_MSG_DELSETELEM, 0);
    nftnl_set_elems_nlmsg_build_payload(nlh, s.get());
    end_message(line_);
  }

  // An element message's body as nft writes it (mnl_nft_setelem_batch: table, set, set id when
  // it has one, then the elements numbered from 1), not in libnftnl's order.
  static void element_list_table(nlmsghdr* nlh, const std::string& table, const std::string& set, uint32_t set_id,
                                 nftnl_set* elems) {
    mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, table.c_str());
    mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set.c_str());
    if (set_id) mnl_attr_put_u32(nlh, NFTA_SET_ELEM_LIST_SET_ID, htonl(set_id));
    nlattr* nest = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
    nftnl_set_elems_iter* it = nftnl_set_elems_iter_create(elems);
    int i = 0;
    for (nftnl_set_elem* e = nftnl_set_elems_iter_next(it); e; e = nftnl_set_elems_iter_next(it))
      nftnl_set_elem_nlmsg_build(nlh, e, ++i);
    nftnl_set_elems_iter_destroy(it);
    mnl_attr_nest_end(nlh, nest);
  }
  void element_list(nlmsghdr* nlh, const std::string& set, uint32_t set_id, nftnl_set* elems) {
    element_list_table(nlh, table_, set, set_id, elems);
  }

  // An element key in the set's datatypes: "A . tcp . 80" (each part padded to 4 bytes in a
  // concatenation, as the kernel stores it).
  std::vector<uint8_t> element_key(const SetInfo& s, const std::vector<std::string_view>& words) {
    if (words.size() != s.key_parts.size() * 2 - 1) unsupported("an element key of another length than its set's");
    std::vector<uint8_t> key;
    const bool concat = s.key_parts.size() > 1;
    for (size_t p = 0; p < s.key_parts.size(); ++p) {
      if (p > 0 && words[2 * p - 1] != ".") unsupported("an element key kpc does not write");
      std::string_view w = words[2 * p];
      size_t at = key.size();
      switch (s.key_parts[p]) {
        case kTypeIpv4:
        case kTypeIpv6: {
          Addr a = address(w, s.key_parts[p] == kTypeIpv6);
          key.insert(key.end(), a.b.begin(), a.b.begin() + static_cast<long>(a.len()));
          break;
        }
        case kTypeProto: key.push_back(l4proto(w)); break;
        case kTypeService: {
          uint16_t port = htons(static_cast<uint16_t>(number(w, 65535)));
          key.insert(key.end(), reinterpret_cast<uint8_t*>(&port), reinterpret_cast<uint8_t*>(&port) + 2);
          break;
        }
        default: unsupported("an element of a key type kpc does not write");
      }
      if (concat) key.resize(at + (key.size() - at + 3) / 4 * 4, 0);
    }
    if (key.size() != s.key_len) unsupported("an element key of another length than its set's");
    return key;
  }

  // add element FAM T S { KEY [comment "C"] [: VERDICT] }  /  delete element FAM T S { KEY }
  void element(const std::vector<std::string_view>& t, const std::string& name, bool add) {
    if (t.size() < 8 || t[5] != "{" || t.back() != "}") unsupported("an element line kpc does not write");
    const SetInfo& s = known_set(name);
    if (s.flags & ~static_cast<uint32_t>(NFT_SET_MAP)) unsupported("elements of a set with flags (interval, timeout, ...)");
    size_t end = t.size() - 1;
    size_t colon = std::find(t.begin() + 6, t.begin() + static_cast<long>(end), std::string_view(":")) - t.begin();
    size_t key_end = colon;
    std::optional<std::string> comment;
    if (key_end >= 8 && t[key_end - 2] == "comment") {
      comment = comment_text(t[key_end - 1]);
      key_end -= 2;
    }
    std::vector<std::string_view> key_words(t.begin() + 6, t.begin() + static_cast<long>(key_end));
    std::vector<uint8_t> key = element_key(s, key_words);
    int32_t code = 0;
    std::string chain;
    if (colon != end) {
      if (!add || !s.verdict_map) unsupported("a value for an element of a set, or of a deleted element");
      if (colon + 1 + verdict_at(t, colon + 1, &code, &chain) != end) unsupported("an element value kpc does not write");
    } else if (add && s.verdict_map) {
      unsupported("a map element without its value");
    }
    if (!add && comment) unsupported("a comment on a deleted element");

    Set set(nftnl_set_alloc());
    nftnl_set_elem* e = nftnl_set_elem_alloc();
    nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key.data(), static_cast<uint32_t>(key.size()));
    if (colon != end) {
      nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, static_cast<uint32_t>(code));
      if (!chain.empty()) nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain.c_str());
    }
    Udata u;
    if (comment) {
      u = new_udata();
      nftnl_udata_put_strz(u.get(), NFTNL_UDATA_SET_ELEM_COMMENT, comment->c_str());
      nftnl_set_elem_set(e, NFTNL_SET_ELEM_USERDATA, nftnl_udata_buf_data(u.get()), nftnl_udata_buf_len(u.get()));
    }
    nftnl_set_elem_add(set.get(), e);
    nlmsghdr* nlh = header(add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM, add ? NLM_F_CREATE : 0);
    element_list(nlh, name, add ? s.id : 0, set.get());  // nft names the set by id too (not on a delete)
    if (!add) return end_message(line_);
    // nft collapses consecutive `add element` commands of one set into the first (nft_cmd_collapse)
    // and then sends the first, and the others in reverse order: held until the run ends.
    --seq_;
    run_set_ = name;
    run_.push_back({std::vector<char>(scratch_.data(), scratch_.data() + MNL_ALIGN(nlh->nlmsg_len)), line_});
  }

  // add flowtable FAM T F { hook ingress priority filter ; devices = { DEV } ; } (one device: the
  // order nft gives several is not pinned here).
  void add_flowtable(const std::vector<std::string_view>& t, const std::string& name) {
    static constexpr std::string_view shape[] = {"{", "hook", "ingress", "priority", "filter", ";", "devices", "=", "{"};
    if (t.size() != 5 + std::size(shape) + 4) unsupported("a flowtable kpc does not write");
    for (size_t i = 0; i < std::size(shape); ++i)
      if (t[5 + i] != shape[i]) unsupported("a flowtable kpc does not write");
    size_t d = 5 + std::size(shape);
    if (t[d + 1] != "}" || t[d + 2] != ";" || t[d + 3] != "}") unsupported("a flowtable with other than one device");
    std::string dev(t[d]);
    if (dev.empty() || dev.size() >= 16 ||
        !std::all_of(dev.begin(), dev.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }))
      unsupported("a device name kpc does not write");
    std::unique_ptr<nftnl_flowtable, Free<nftnl_flowtable, nftnl_flowtable_free>> f(nftnl_flowtable_alloc());
    nftnl_flowtable_set_str(f.get(), NFTNL_FLOWTABLE_TABLE, table_.c_str());
    nftnl_flowtable_set_str(f.get(), NFTNL_FLOWTABLE_NAME, name.c_str());
    nftnl_flowtable_set_u32(f.get(), NFTNL_FLOWTABLE_HOOKNUM, NF_NETDEV_INGRESS);
    nftnl_flowtable_set_s32(f.get(), NFTNL_FLOWTABLE_PRIO, 0);  // "filter"
    const char* devs[] = {dev.c_str(), nullptr};
    nftnl_flowtable_set_array(f.get(), NFTNL_FLOWTABLE_DEVICES, devs);
    nftnl_flowtable_set_u32(f.get(), NFTNL_FLOWTABLE_FLAGS, 0);
    nlmsghdr* nlh = header(NFT_MSG_NEWFLOWTABLE, NLM_F_CREATE);
    nftnl_flowtable_nlmsg_build_payload(nlh, f.get());
    end_message(line_);
  }

  // ---------------------------------------------------------------- rules
  // One statement's register use starts afresh (nft releases registers after each statement).
  struct RuleCtx {
    nftnl_rule* r;
    bool l4proto_matched = false;  // `meta l4proto X` seen: a port may be mapped
    bool terminal = false;         // a verdict or a final statement written
    bool inet_dependency = false;  // the inet `meta nfproto` dependency written
  };

  void add_rule(const std::vector<std::string_view>& t, const std::string& chain) {
    size_t end = t.size();
    std::optional<std::string> comment;
    if (end >= 7 && t[end - 2] == "comment") {
      comment = comment_text(t[end - 1]);
      end -= 2;
    }
    if (end <= 5) unsupported("a rule without statements");
    Rule rule(nftnl_rule_alloc());
    nftnl_rule_set_str(rule.get(), NFTNL_RULE_TABLE, table_.c_str());
    nftnl_rule_set_str(rule.get(), NFTNL_RULE_CHAIN, chain.c_str());
    RuleCtx c{rule.get()};
    pending_.clear();
    for (size_t i = 5; i < end;) {
      if (c.terminal) unsupported("a statement after the rule's verdict");
      i = statement(c, t, i, end);
    }
    Udata u;
    if (comment) {
      u = new_udata();
      nftnl_udata_put_strz(u.get(), NFTNL_UDATA_RULE_COMMENT, comment->c_str());
    }
    // Anonymous sets go first, each followed by its elements, as nft sends them.
    for (auto& p : pending_) {
      nlmsghdr* nlh = header(NFT_MSG_NEWSET, NLM_F_CREATE);
      nftnl_set_nlmsg_build_payload(nlh, p.set.get());
      end_message(line_);
      nlh = header(NFT_MSG_NEWSETELEM, NLM_F_CREATE);
      element_list(nlh, nftnl_set_get_str(p.set.get(), NFTNL_SET_NAME), nftnl_set_get_u32(p.set.get(), NFTNL_SET_ID), p.set.get());
      end_message(line_);
    }
    pending_.clear();
    nlmsghdr* nlh = header(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
    nftnl_rule_nlmsg_build_payload(nlh, rule.get());
    // nft appends the comment after the expressions (libnftnl would put it before them).
    if (u) mnl_attr_put(nlh, NFTA_RULE_USERDATA, nftnl_udata_buf_len(u.get()), nftnl_udata_buf_data(u.get()));
    end_message(line_);
  }

  // The payload field of `ip|ip6 saddr|daddr` (family checked against the table).
  struct Field {
    bool v6;
    uint32_t offset, tmpl;
  };
  Field address_field(std::string_view proto, std::string_view field) {
    bool v6 = proto == "ip6";
    if (!v6 && proto != "ip") unsupported("a protocol kpc does not match: " + std::string(proto));
    if ((v6 && fam_.nfproto == NFPROTO_IPV4) || (!v6 && fam_.nfproto == NFPROTO_IPV6)) unsupported("an address of the other family");
    if (field == "saddr") return {v6, v6 ? 8u : 12u, v6 ? kTmplIp6Saddr : kTmplIpSaddr};
    if (field == "daddr") return {v6, v6 ? 24u : 16u, v6 ? kTmplIp6Daddr : kTmplIpDaddr};
    unsupported("a field kpc does not match: " + std::string(field));
  }

  // In an inet table nft puts `meta nfproto ipv4|ipv6` before the first ip/ip6 statement;
  // kpc writes one such statement per rule (the fast path's concatenations).
  void inet_dependency(RuleCtx& c, bool v6) {
    if (fam_.nfproto != NFPROTO_INET) return;
    if (c.inet_dependency) unsupported("two address statements in an inet rule");
    c.inet_dependency = true;
    add_meta_load(c.r, NFT_META_NFPROTO, NFT_REG_1);
    uint8_t p = v6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
    add_cmp(c.r, NFT_CMP_EQ, &p, 1);
  }

  size_t statement(RuleCtx& c, const std::vector<std::string_view>& t, size_t i, size_t end) {
    auto at = [&](size_t k) -> std::string_view { return i + k < end ? t[i + k] : std::string_view(); };
    std::string_view w = t[i];
    // A concatenation: `ip daddr . meta l4proto . th dport vmap @M`, `meta l4proto . th dport @S`, ...
    if (at(2) == "." || (w == "meta" && at(1) == "l4proto" && at(2) == ".")) return concatenation(c, t, i, end);
    if (w == "ip" || w == "ip6") return address_match(c, t, i, end);
    if (w == "meta" && at(1) == "l4proto") {
      uint8_t p = l4proto(at(2));
      add_meta_load(c.r, NFT_META_L4PROTO, NFT_REG_1);
      add_cmp(c.r, NFT_CMP_EQ, &p, 1);
      c.l4proto_matched = true;
      return i + 3;
    }
    if ((w == "mark" && at(1) == "and") || (w == "meta" && at(1) == "mark" && at(2) == "&")) {
      // mark and X == Y / meta mark & X == Y: (mark & X) ^ 0 compared with Y.
      size_t k = w == "mark" ? 2 : 3;
      uint32_t mask = hex32(at(k));
      if (at(k + 1) != "==") unsupported("a mark test kpc does not write");
      uint32_t want = at(k + 2) == "0" ? 0 : hex32(at(k + 2));
      uint32_t zero = 0;
      add_meta_load(c.r, NFT_META_MARK, NFT_REG_1);
      add_bitwise(c.r, &mask, &zero, 4, true);
      add_cmp(c.r, NFT_CMP_EQ, &want, 4);
      return i + k + 3;
    }
    if ((w == "mark" && at(1) == "set" && at(2) == "mark") ||
        (w == "meta" && at(1) == "mark" && at(2) == "set" && at(3) == "meta" && at(4) == "mark")) {
      // mark set mark or|xor X, meta mark set meta mark | X / & X: load, (mark & m) ^ x, store.
      size_t k = w == "mark" ? 3 : 5;
      std::string_view op = at(k);
      uint32_t v = hex32(at(k + 1)), mask, xorv;
      if (op == "or" || op == "|") mask = ~v, xorv = v;
      else if (op == "xor") mask = 0xffffffffu, xorv = v;
      else if (op == "&") mask = v, xorv = 0;
      else unsupported("a mark operation kpc does not write");
      if ((w == "mark") != (op == "or" || op == "xor")) unsupported("a mark operation kpc does not write");
      add_meta_load(c.r, NFT_META_MARK, NFT_REG_1);
      add_bitwise(c.r, &mask, &xorv, 4, true);
      nftnl_expr* e = expr("meta");
      nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, NFT_META_MARK);
      nftnl_expr_set_u32(e, NFTNL_EXPR_META_SREG, NFT_REG_1);
      nftnl_rule_add_expr(c.r, e);
      return i + k + 2;
    }
    if (w == "ct" && at(1) == "state") {
      // A flag test: (ct state & bit) != 0.
      static constexpr std::pair<std::string_view, uint32_t> states[] = {
          {"invalid", 1}, {"established", 2}, {"related", 4}, {"new", 8}, {"untracked", 64}};
      auto s = std::find_if(std::begin(states), std::end(states), [&](const auto& p) { return p.first == at(2); });
      if (s == std::end(states)) unsupported("a ct state kpc does not write");
      uint32_t mask = s->second, zero = 0;
      nftnl_expr* e = expr("ct");
      nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
      nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
      nftnl_rule_add_expr(c.r, e);
      add_bitwise(c.r, &mask, &zero, 4, false);
      add_cmp(c.r, NFT_CMP_NEQ, &zero, 4);
      return i + 3;
    }
    if (w == "fib" && (at(1) == "saddr" || at(1) == "daddr") && at(2) == "type" && at(3) == "local") {
      nftnl_expr* e = expr("fib");
      nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_FLAGS, at(1) == "saddr" ? NFTA_FIB_F_SADDR : NFTA_FIB_F_DADDR);
      nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
      nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
      nftnl_rule_add_expr(c.r, e);
      uint32_t local = 2;  // RTN_LOCAL
      add_cmp(c.r, NFT_CMP_EQ, &local, 4);
      return i + 4;
    }
    if (w == "iifname") return iifname(c, t, i, end);
    if (w == "numgen") return numgen_vmap(c, t, i, end);
    if (w == "update" && at(1).size() > 1 && at(1)[0] == '@' && at(2) == "{" && at(5) == "}") {
      // update @S { ip saddr }: the key loaded, then dynset (no timeout of its own).
      std::string set = object_name(at(1).substr(1));
      Field f = address_field(at(3), at(4));
      const SetInfo& s = known_set(set);
      if (!(s.flags & NFT_SET_EVAL) || s.key_parts != std::vector<uint32_t>{f.v6 ? kTypeIpv6 : kTypeIpv4})
        unsupported("update of a set that is not a dynamic set of that address type");
      inet_dependency(c, f.v6);
      add_payload(c.r, NFT_PAYLOAD_NETWORK_HEADER, f.offset, f.v6 ? 16 : 4, NFT_REG_1);
      nftnl_expr* e = expr("dynset");
      nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG_1);
      nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_UPDATE);
      nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, set.c_str());
      nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SET_ID, s.id);
      nftnl_rule_add_expr(c.r, e);
      return i + 6;
    }
    if (w == "dnat" && at(1) == "to") return dnat(c, at(2), i + 3);
    if (w == "masquerade" && at(1) == "fully-random") {
      if (fam_.nfproto == NFPROTO_INET) unsupported("masquerade in an inet table");
      nftnl_expr* e = expr("masq");
      nftnl_expr_set_u32(e, NFTNL_EXPR_MASQ_FLAGS, NF_NAT_RANGE_PROTO_RANDOM_FULLY);
      nftnl_rule_add_expr(c.r, e);
      c.terminal = true;
      return i + 2;
    }
    if (w == "reject") {
      // ip: icmp port-unreachable (3); ip6: icmpv6 port-unreachable (4). inet's icmpx is not kpc's.
      if (fam_.nfproto == NFPROTO_INET) unsupported("reject in an inet table");
      nftnl_expr* e = expr("reject");
      nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMP_UNREACH);
      nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, fam_.nfproto == NFPROTO_IPV6 ? 4 : 3);
      nftnl_rule_add_expr(c.r, e);
      c.terminal = true;
      return i + 1;
    }
    if (w == "counter") {
      nftnl_rule_add_expr(c.r, expr("counter"));
      return i + 1;
    }
    if (w == "flow" && at(1) == "add" && at(2).size() > 1 && at(2)[0] == '@') {
      std::string ft = object_name(at(2).substr(1));
      nftnl_expr* e = expr("flow_offload");
      nftnl_expr_set_str(e, NFTNL_EXPR_FLOW_TABLE_NAME, ft.c_str());
      nftnl_rule_add_expr(c.r, e);
      return i + 3;
    }
    int32_t code = 0;
    std::string chain;
    size_t n = verdict_at(t, i, &code, &chain);
    if (i + n > end) unsupported("a verdict without its chain");
    add_verdict(c.r, code, chain.empty() ? nullptr : &chain);
    c.terminal = true;
    return i + n;
  }

  // ip|ip6 saddr|daddr [!=] VALUE: a value or prefix (a shorter load for a byte-aligned prefix,
  // a mask otherwise), @set, or { elements } (one element: the value itself).
  size_t address_match(RuleCtx& c, const std::vector<std::string_view>& t, size_t i, size_t end) {
    if (i + 2 >= end) unsupported("an address match without its value");
    Field f = address_field(t[i], t[i + 1]);
    size_t k = i + 2;
    bool neq = false;
    if (t[k] == "!=") neq = true, ++k;
    if (k >= end) unsupported("an address match without its value");
    inet_dependency(c, f.v6);
    const uint32_t len = f.v6 ? 16 : 4;
    if (t[k].size() > 1 && t[k][0] == '@') {
      std::string set = object_name(t[k].substr(1));
      const SetInfo& s = known_set(set);
      if (s.verdict_map || s.key_parts != std::vector<uint32_t>{f.v6 ? kTypeIpv6 : kTypeIpv4})
        unsupported("a lookup of a set of another type: " + set);
      add_payload(c.r, NFT_PAYLOAD_NETWORK_HEADER, f.offset, len, NFT_REG_1);
      add_lookup(c.r, NFT_REG_1, false, set, s.id, neq);
      return k + 1;
    }
    if (t[k] == "{") {
      // "{ a , b }" (kpc's firewall) or "{ a,b }" (kpc's service CIDRs).
      std::vector<Prefix> elems;
      size_t j = k + 1;
      for (; j < end && t[j] != "}"; ++j) {
        if (t[j] == ",") continue;
        std::string_view item = t[j];
        for (size_t from = 0; from <= item.size();) {
          size_t comma = item.find(',', from);
          if (comma == std::string_view::npos) comma = item.size();
          if (comma > from) elems.push_back(prefix(item.substr(from, comma - from), f.v6));  // "a," "b"
          from = comma + 1;
        }
      }
      if (j >= end || elems.empty()) unsupported("an anonymous set kpc does not write");
      if (elems.size() == 1) prefix_match(c, f, elems[0], neq);
      else anonymous_set(c, f, elems, neq);
      return j + 1;
    }
    prefix_match(c, f, prefix(t[k], f.v6), neq);
    return k + 1;
  }

  void prefix_match(RuleCtx& c, const Field& f, const Prefix& p, bool neq) {
    const uint32_t len = static_cast<uint32_t>(p.addr.len());
    const uint32_t op = neq ? NFT_CMP_NEQ : NFT_CMP_EQ;
    if (p.len == len * 8) {
      add_payload(c.r, NFT_PAYLOAD_NETWORK_HEADER, f.offset, len, NFT_REG_1);
      add_cmp(c.r, op, p.addr.b.data(), len);
    } else if (p.len % 8 == 0 && p.len > 0) {
      add_payload(c.r, NFT_PAYLOAD_NETWORK_HEADER, f.offset, p.len / 8, NFT_REG_1);
      add_cmp(c.r, op, p.addr.b.data(), p.len / 8);
    } else {
      std::array<uint8_t, 16> mask{}, zero{};
      for (unsigned bit = 0; bit < p.len; ++bit) mask[bit / 8] |= static_cast<uint8_t>(0x80 >> (bit % 8));
      add_payload(c.r, NFT_PAYLOAD_NETWORK_HEADER, f.offset, len, NFT_REG_1);
      add_bitwise(c.r, mask.data(), zero.data(), len, false);
      add_cmp(c.r, op, p.addr.b.data(), len);
    }
  }

  struct PendingSet {
    Set set;
  };

  Set new_anonymous_set(const char* name_template, uint32_t flags, uint32_t key_type, uint32_t key_len, uint32_t size) {
    Set s(nftnl_set_alloc());
    nftnl_set_set_str(s.get(), NFTNL_SET_TABLE, table_.c_str());
    nftnl_set_set_str(s.get(), NFTNL_SET_NAME, name_template);
    nftnl_set_set_u32(s.get(), NFTNL_SET_FLAGS, flags);
    nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_TYPE, key_type);
    nftnl_set_set_u32(s.get(), NFTNL_SET_KEY_LEN, key_len);
    if (flags & NFT_SET_MAP) {
      nftnl_set_set_u32(s.get(), NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
      nftnl_set_set_u32(s.get(), NFTNL_SET_DATA_LEN, 0);
    }
    nftnl_set_set_u32(s.get(), NFTNL_SET_ID, next_anonymous_id_++);
    nftnl_set_set_u32(s.get(), NFTNL_SET_DESC_SIZE, size);
    return s;
  }

  static void set_udata(nftnl_set* s, nftnl_udata_buf* u) {
    nftnl_set_set_data(s, NFTNL_SET_USERDATA, nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
  }

  static std::array<uint8_t, 16> plus_one(std::array<uint8_t, 16> b, size_t len, bool* overflow) {
    for (size_t i = len; i-- > 0;) {
      if (++b[i] != 0) return b;
    }
    *overflow = true;
    return b;
  }

  // { a, b/c, ... } with two or more elements: an anonymous constant set. With a prefix among
  // them it is an interval set: nft sends [0, end], then [start] [end+1, end] per range, in
  // ascending order. kpc's ranges never touch or overlap; where they would (nft merges them),
  // start at 0 or reach the last address (other elements), the line is unsupported.
  void anonymous_set(RuleCtx& c, const Field& f, std::vector<Prefix> elems, bool neq) {
    const size_t len = f.v6 ? 16 : 4;
    bool interval = std::any_of(elems.begin(), elems.end(), [](const Prefix& p) { return p.explicit_len; });
    struct Range {
      std::array<uint8_t, 16> lo, next;  // next = last + 1
    };
    std::vector<Range> ranges;
    for (const auto& p : elems) {
      Range r;
      r.lo = p.addr.b;
      std::array<uint8_t, 16> last = p.addr.b;
      for (unsigned bit = p.len; bit < len * 8; ++bit) last[bit / 8] |= static_cast<uint8_t>(0x80 >> (bit % 8));
      bool overflow = false;
      r.next = plus_one(last, len, &overflow);
      if (overflow) unsupported("an anonymous set reaching the last address");
      ranges.push_back(r);
    }
    auto less = [&](const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b) {
      return std::memcmp(a.data(), b.data(), len) < 0;
    };
    if (!interval) {
      for (size_t i = 1; i < ranges.size(); ++i)
        if (!less(ranges[i - 1].lo, ranges[i].lo)) unsupported("an anonymous set not in ascending order");
    } else {
      std::sort(ranges.begin(), ranges.end(), [&](const Range& a, const Range& b) { return less(a.lo, b.lo); });
      std::array<uint8_t, 16> zero{};
      if (!less(zero, ranges[0].lo)) unsupported("an anonymous interval set starting at the first address");
      for (size_t i = 1; i < ranges.size(); ++i)
        if (!less(ranges[i - 1].next, ranges[i].lo)) unsupported("anonymous set ranges that touch or overlap (nft merges them)");
    }
    uint32_t key_type = f.v6 ? kTypeIpv6 : kTypeIpv4;
    uint32_t size = static_cast<uint32_t>(interval ? 1 + 2 * ranges.size() : ranges.size());
    uint32_t flags = NFT_SET_ANONYMOUS | NFT_SET_CONSTANT | (interval ? uint32_t{NFT_SET_INTERVAL} : 0u);
    Set s = new_anonymous_set("__set%d", flags, key_type, static_cast<uint32_t>(len), size);
    Udata u = new_udata();
    nftnl_udata_put_u32(u.get(), NFTNL_UDATA_SET_KEYBYTEORDER, kBigEndian);
    if (interval) nftnl_udata_put_u32(u.get(), NFTNL_UDATA_SET_MERGE_ELEMENTS, 1);
    std::pair<uint32_t, uint32_t> payload{f.v6 ? kDescIp6 : kDescIp, f.tmpl};
    typeof_udata(u.get(), NFTNL_UDATA_SET_KEY_TYPEOF, kExprPayload, &payload);
    set_udata(s.get(), u.get());
    auto add_elem = [&](const std::array<uint8_t, 16>& key, bool is_end) {
      nftnl_set_elem* e = nftnl_set_elem_alloc();
      if (is_end) nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
      nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key.data(), static_cast<uint32_t>(len));
      nftnl_set_elem_add(s.get(), e);
    };
    if (interval) {
      add_elem(std::array<uint8_t, 16>{}, true);
      for (const auto& r : ranges) add_elem(r.lo, false), add_elem(r.next, true);
    } else {
      for (const auto& r : ranges) add_elem(r.lo, false);
    }
    add_payload(c.r, NFT_PAYLOAD_NETWORK_HEADER, f.offset, static_cast<uint32_t>(len), NFT_REG_1);
    add_lookup(c.r, NFT_REG_1, false, "__set%d", nftnl_set_get_u32(s.get(), NFTNL_SET_ID), neq);
    pending_.push_back({std::move(s)});
  }

  // numgen random mod N vmap { 0 : goto C0 , 1 : goto C1 , ... }: numgen into reg 1 and a
  // lookup in an anonymous verdict map of N integer keys (host byte order).
  size_t numgen_vmap(RuleCtx& c, const std::vector<std::string_view>& t, size_t i, size_t end) {
    if (i + 6 >= end || t[i + 1] != "random" || t[i + 2] != "mod" || t[i + 4] != "vmap" || t[i + 5] != "{")
      unsupported("a numgen statement kpc does not write");
    uint32_t n = static_cast<uint32_t>(number(t[i + 3], 1u << 20));
    if (n == 0) unsupported("numgen mod 0");
    Set s = new_anonymous_set("__map%d", NFT_SET_ANONYMOUS | NFT_SET_CONSTANT | NFT_SET_MAP, kTypeInteger, 4, n);
    Udata u = new_udata();
    nftnl_udata_put_u32(u.get(), NFTNL_UDATA_SET_KEYBYTEORDER, kHostOrder);
    nftnl_udata_put_u32(u.get(), NFTNL_UDATA_SET_DATABYTEORDER, 0);
    typeof_udata(u.get(), NFTNL_UDATA_SET_DATA_TYPEOF, kExprVerdict, nullptr);
    nftnl_udata_put_u32(u.get(), NFTNL_UDATA_SET_DATA_INTERVAL, 0);
    set_udata(s.get(), u.get());
    size_t j = i + 6;
    for (uint32_t k = 0; k < n; ++k) {
      // "K : goto C" then "," or "}"
      if (j + 2 >= end || t[j] != std::to_string(k) || t[j + 1] != ":") unsupported("numgen map keys other than 0..N-1 in order");
      int32_t code = 0;
      std::string chain;
      j += 2;
      j += verdict_at(t, j, &code, &chain);
      if (j >= end || t[j] != (k + 1 == n ? "}" : ",")) unsupported("a numgen map kpc does not write");
      ++j;
      nftnl_set_elem* e = nftnl_set_elem_alloc();
      nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &k, 4);
      nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, static_cast<uint32_t>(code));
      if (!chain.empty()) nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain.c_str());
      nftnl_set_elem_add(s.get(), e);
    }
    nftnl_expr* e = expr("numgen");
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_DREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_MODULUS, n);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_TYPE, NFT_NG_RANDOM);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_OFFSET, 0);
    nftnl_rule_add_expr(c.r, e);
    add_lookup(c.r, NFT_REG_1, true, "__map%d", nftnl_set_get_u32(s.get(), NFTNL_SET_ID), false);
    pending_.push_back({std::move(s)});
    c.terminal = true;
    return j;
  }

  // A concatenation of ip/ip6 saddr|daddr, meta l4proto and th dport, each loaded into the next
  // register units, then `vmap @M` or `@S`.
  size_t concatenation(RuleCtx& c, const std::vector<std::string_view>& t, size_t i, size_t end) {
    struct Part {
      uint32_t type, base, offset, len;
      bool meta;
    };
    std::vector<Part> parts;
    std::optional<bool> address_v6;
    for (;;) {
      if (i + 1 >= end) unsupported("a concatenation without its set");
      std::string_view a = t[i], b = t[i + 1];
      if (a == "meta" && b == "l4proto") {
        parts.push_back({kTypeProto, 0, 0, 1, true});
      } else if (a == "th" && b == "dport") {
        parts.push_back({kTypeService, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, false});
      } else if (a == "ip" || a == "ip6") {
        Field f = address_field(a, b);
        if (address_v6) unsupported("two addresses in a concatenation");
        address_v6 = f.v6;
        parts.push_back({f.v6 ? kTypeIpv6 : kTypeIpv4, NFT_PAYLOAD_NETWORK_HEADER, f.offset, f.v6 ? 16u : 4u, false});
      } else {
        unsupported("a concatenation part kpc does not write: " + std::string(a));
      }
      i += 2;
      if (i < end && t[i] == ".") {
        ++i;
        continue;
      }
      break;
    }
    if (parts.size() < 2) unsupported("a concatenation of one part");
    bool vmap = i < end && t[i] == "vmap";
    if (vmap) ++i;
    if (i >= end || t[i].size() < 2 || t[i][0] != '@') unsupported("a concatenation not looked up in a named set");
    std::string set = object_name(t[i].substr(1));
    const SetInfo& s = known_set(set);
    std::vector<uint32_t> types;
    for (const auto& p : parts) types.push_back(p.type);
    if (s.key_parts != types || s.verdict_map != vmap) unsupported("a lookup in a set of another type: " + set);
    if (address_v6) inet_dependency(c, *address_v6);
    uint32_t unit = 0;
    for (const auto& p : parts) {
      uint32_t reg = reg_of_unit(unit);
      if (p.meta) add_meta_load(c.r, NFT_META_L4PROTO, reg);
      else add_payload(c.r, p.base, p.offset, p.len, reg);
      unit += (p.len + 3) / 4;
    }
    add_lookup(c.r, NFT_REG_1, vmap, set, s.id, false);
    if (vmap) c.terminal = true;
    return i + 1;
  }

  // iifname [!=] NAME: the name NUL-padded to IFNAMSIZ; NAME* compares the prefix only.
  size_t iifname(RuleCtx& c, const std::vector<std::string_view>& t, size_t i, size_t end) {
    size_t k = i + 1;
    bool neq = k < end && t[k] == "!=";
    if (neq) ++k;
    if (k >= end) unsupported("iifname without a name");
    std::string_view name = t[k];
    bool wildcard = !name.empty() && name.back() == '*';
    if (wildcard) name.remove_suffix(1);
    if (name.empty() || name.size() >= IFNAMSIZ) unsupported("an interface name of that length");
    for (char ch : name)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'))
        unsupported("an interface name kpc does not write");
    char buf[IFNAMSIZ] = {};
    std::memcpy(buf, name.data(), name.size());
    add_meta_load(c.r, NFT_META_IIFNAME, NFT_REG_1);
    add_cmp(c.r, neq ? NFT_CMP_NEQ : NFT_CMP_EQ, buf, wildcard ? static_cast<uint32_t>(name.size()) : IFNAMSIZ);
    return k + 1;
  }

  // dnat to A:P / [A6]:P after `meta l4proto X`: address in reg 1, port in reg 2 (nft gives
  // each a whole 128-bit register), nat with the port flag.
  size_t dnat(RuleCtx& c, std::string_view target, size_t next) {
    if (fam_.nfproto == NFPROTO_INET) unsupported("dnat in an inet table");
    if (!c.l4proto_matched) unsupported("dnat to a port without a protocol match");
    bool v6 = fam_.nfproto == NFPROTO_IPV6;
    std::string_view host, port;
    if (v6) {
      if (target.size() < 4 || target[0] != '[') unsupported("an IPv6 dnat target kpc does not write");
      size_t close = target.find("]:");
      if (close == std::string_view::npos) unsupported("an IPv6 dnat target kpc does not write");
      host = target.substr(1, close - 1), port = target.substr(close + 2);
    } else {
      size_t colon = target.find(':');
      if (colon == std::string_view::npos) unsupported("a dnat target without a port");
      host = target.substr(0, colon), port = target.substr(colon + 1);
    }
    Addr a = address(host, v6);
    uint16_t p = htons(static_cast<uint16_t>(number(port, 65535)));
    add_immediate(c.r, NFT_REG_1, a.b.data(), static_cast<uint32_t>(a.len()));
    add_immediate(c.r, NFT_REG_2, &p, 2);
    nftnl_expr* e = expr("nat");
    nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY, fam_.nfproto);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN, NFT_REG_2);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
    nftnl_rule_add_expr(c.r, e);
    c.terminal = true;
    return next;
  }

  const SetLookup& lookup_;
  uint32_t seq_;
  uint32_t line_ = 0;
  uint32_t next_set_id_ = 1;  // named sets, from 1 (see run())
  uint32_t named_sets_ = 0, next_anonymous_id_ = 1;
  Family fam_{};
  std::string table_;
  std::vector<char> out_, scratch_;
  std::vector<uint32_t> line_of_;
  std::vector<PendingSet> pending_;
  std::vector<HeldElement> run_;  ///< a run of `add element` lines of set run_set_
  std::string run_set_;
  std::map<std::string, SetInfo, std::less<>> declared_;
  std::map<std::string, SetInfo, std::less<>> from_kernel_;
  std::set<std::string> deleted_;
};

}  // namespace

EncodeResult encode_program(std::string_view program, const SetLookup& lookup, uint32_t first_seq) {
  Encoder e(lookup, first_seq);
  return e.run(program);
}

SetLookup lookup_from(const std::map<std::string, SetInfo, std::less<>>& declared) {
  return [declared](uint8_t, const std::string&, const std::string& name) -> std::optional<SetInfo> {
    auto it = declared.find(name);
    if (it == declared.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace kpc::applier::nftnl
