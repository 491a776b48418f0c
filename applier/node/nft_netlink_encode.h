// kpc's nftables transactions (compiler/nftables print_transaction: the text `nft -f` reads) encoded
// as the netlink batch nft 1.0.6 would send for them, without nft's cache: the same messages, flags,
// attributes, registers, byte orders, anonymous sets and userdata TLVs, so that the kernel ends up
// with what `nft -f` gives and `nft list` prints it back the same. The vocabulary is closed: the
// lines and statements compiler/nftables/lower.cpp and compiler/fastpath/fastpath.cpp write. Any
// other line, statement or value makes the whole program "unsupported" (nothing is encoded), and
// the caller falls back to libnftables: an encoding is never guessed.
//
// nft consults its cache in a few places; the encoder needs it for sets only: an element or a
// lookup of a set the program does not declare needs its key type (and nft sends the set's id).
// Those come from a SetLookup, which asks the kernel for that one set (nft_netlink.h) — a single
// GETSET, not the dump of every chain and rule nft makes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpc::applier::nftnl {

/// What the encoder needs to know of a set: its key (a chain of nft datatype ids, one per part
/// of a concatenation), flags, data type, and the id nft names it by in a batch.
struct SetInfo {
  std::vector<uint32_t> key_parts;  ///< nft datatype ids: 7 ipv4_addr, 8 ipv6_addr, 12 inet_proto, 13 inet_service, 4 integer
  uint32_t key_len = 0;
  uint32_t flags = 0;       ///< NFT_SET_* flags
  bool verdict_map = false;  ///< data type verdict
  uint32_t id = 0;          ///< NFTA_SET_ID (the batch's for a set declared in it; the kernel's otherwise)
};

/// A set the program uses but does not declare: (family, table, name) -> its definition in the
/// kernel, or nullopt when the kernel has no such set (nft would fail: unsupported, so that
/// libnftables reports it).
using SetLookup = std::function<std::optional<SetInfo>(uint8_t family, const std::string& table, const std::string& name)>;

struct EncodedBatch {
  std::vector<char> bytes;          ///< BATCH_BEGIN ... BATCH_END, ready for one sendmsg
  std::vector<uint32_t> line_of;    ///< per message (index = seq - first_seq): the program line (1-based); 0 begin/end
  uint32_t first_seq = 0, last_seq = 0;  ///< of BATCH_BEGIN and BATCH_END
  size_t messages = 0;              ///< between begin and end
};

struct EncodeResult {
  bool ok = false;
  std::string why;  ///< unsupported: "line N: reason"
  EncodedBatch batch;
  /// Sets the program declares (name -> definition) after its last line: a test's catalog for a
  /// later program.
  std::map<std::string, SetInfo, std::less<>> declared;
};

/// Encodes the whole program, or nothing. seq numbers start at first_seq.
EncodeResult encode_program(std::string_view program, const SetLookup& lookup, uint32_t first_seq = 1);

/// The sets a program declares, with the datatypes it gives them (a SetLookup for a later
/// program in tests: ids are 0).
SetLookup lookup_from(const std::map<std::string, SetInfo, std::less<>>& declared);

}  // namespace kpc::applier::nftnl
