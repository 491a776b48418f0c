// The nftables proof's reference state ("want"): the nft model's state of kube-proxy's full
// transaction applied to an empty node, kept from one proof to the next and brought up to date
// object by object instead of applying the whole transaction (75 MB, ~600,000 commands at
// 10,000 Services) every time.
//
// A full transaction is split into per-object blocks: the commands naming one chain (its
// add/flush/delete and its rules), one set or map (add/flush/delete), one element (a set's or
// map's key: its add/delete). What one object ends up as in a whole apply depends only on its
// own block (given that the transaction applies), so on the next full text only the objects
// whose block changed are redone on the kept state, in one nft transaction on the model:
//   1. flush the chains whose rules changed, delete the elements and chains that changed
//      shape or are gone;
//   2. the new blocks of every changed or new object, in the transaction's order;
// then a cheap check that the state holds exactly the text's chains, sets and element count.
// Chains and sets created on the way are put back in the order a whole apply creates them
// (`nft list` prints them in that order) when state() is asked for; the proof compares by
// name and skips that. Anything else -- a command other than add/flush/delete of kube-proxy's
// table, chains, rules, sets, maps and elements, a changed table command, a set or map that
// redone whose elements are in a part that did not change, an object with commands in two parts,
// any apply error -- and the whole
// text is applied to an empty state instead: the result is always the whole apply's
// (tests/property/applier_nft_want_props_test.cpp compares the listings).
//
// The text comes in parts (IncrementalCompiler::full_nft_program_parts: setupNFTables'
// operations, then one part per Service), each with an id and a version: a part whose id and
// version are those of the last update is not read again, so one endpoint change costs the
// Service's part, not the 75 MB. Within the parts that did change, blocks are compared exactly:
// a 64-bit digest of their lines and their line count reject most changed blocks at once, and a
// block whose digest and count match is compared line by line with the last text's. Object
// names are views into the kept parts' texts (no copies to make and free).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "verifier/nft/nft.h"

namespace kpc::applier {

class NftWant {
 public:
  struct Update {
    bool ok = false;            ///< the state is the whole apply of the text
    bool incremental = false;   ///< by the object path (false: the whole text applied)
    std::string why_whole;      ///< why the object path was not taken (empty: it was, or first use)
    size_t objects = 0;         ///< objects in the text
    size_t objects_redone = 0;  ///< objects whose block changed (incremental path)
    size_t parts_read = 0;      ///< parts split this time (the others were unchanged)
    /// Incremental path: the chains and sets redone (an element's set; an object gone counts).
    std::vector<std::string> redone_chains, redone_sets;
    verifier::nft::ApplyResult apply;  ///< the whole apply's result when it failed
    double parse_ms = 0, apply_ms = 0, check_ms = 0;  ///< the split of the text; the model; the check
  };
  /// One part of the text: see the file comment. version 0: changed (never reused).
  struct Part {
    uint64_t id = 0, version = 0;
    std::string_view text;
  };

  /// Makes state() the whole apply of `full_text` (a full transaction of kube-proxy's table).
  Update update(std::string full_text);  ///< (one part, split in full)
  /// The same for the text made of `parts` (their texts are copied where they are read).
  Update update(const std::vector<Part>& parts);
  /// The text of the last update (also when it did not apply).
  std::string text() const;
  /// The whole apply's state, chains and sets in its creation order (`nft list` order).
  const verifier::nft::NftState& state();
  /// The same objects, possibly not in creation order (the sort is skipped until state() is
  /// asked for): what the proof's comparison, which goes by name, reads.
  const verifier::nft::NftState& state_any_order() const { return state_; }
  bool valid() const { return valid_; }
  void reset();

  /// For tests: skip the last step, the creation order (a deliberately broken object path).
  bool test_skip_reorder = false;
  /// For tests: every digest 0, so that only the line-by-line comparison tells blocks apart.
  bool test_constant_digests = false;

 public:
  struct Obj {
    char kind = 0;               ///< 'c' chain, 's' set or map, 'e' element
    std::string_view name;       ///< chain or set name; element: "SET { KEY" (in the part's text)
    std::string_view set;        ///< element: its set
    uint64_t digest = 0, head = 0;  ///< all lines; chain/set commands only (not rules)
    uint32_t lines = 0;
    uint32_t first_line = UINT32_MAX, last_line = UINT32_MAX;  ///< chained by Piece::next_line
    int64_t created = -1;        ///< line (in its part) of the command creating the final incarnation
    bool present = false;        ///< exists after the whole text
    bool is_map = false;
    bool elements_seen = false;  ///< set: one of its elements came already (in its part)
  };
  /// One part, split: its objects and lines.
  struct Piece {
    uint64_t id = 0, version = 0;
    bool ok = false;
    std::string why;
    std::string text;  ///< owns what the views point to (a Piece is never moved: held by pointer)
    std::string family, table;  ///< of its commands ("" for an empty part)
    std::vector<Obj> objs;
    std::unordered_map<std::string_view, uint32_t> index[3];  ///< name -> objs, per kind
    std::vector<uint32_t> line_obj;             ///< per line: its object (UINT32_MAX: the table)
    std::vector<std::string_view> lines;
    std::vector<uint32_t> next_line;            ///< per line: its object's next line (UINT32_MAX: none)
    std::vector<std::string_view> table_lines;  ///< the table commands, in order
    size_t present[3] = {0, 0, 0};              ///< objects that exist after the part, per kind
    std::vector<std::string_view> element_sets;  ///< the sets and maps its elements are of
    const Obj* find(char kind, std::string_view name) const;
  };

 private:
  struct Where {
    const Piece* piece = nullptr;
    uint32_t obj = 0;
    const Obj& o() const { return piece->objs[obj]; }
  };
  static std::unique_ptr<Piece> split(uint64_t id, uint64_t version, std::string text, bool constant_digests);
  /// The object's lines in `a` equal the other's in `b`, line for line (rules_too: every line;
  /// else only the chain/set commands, the `head`).
  static bool same_block(const Piece& a, const Obj& x, const Piece& b, const Obj& y, bool rules_too);
  bool incremental(std::vector<std::unique_ptr<Piece>>& next, const std::vector<const Piece*>& fresh, std::string* why,
                   Update* u);
  bool whole(std::vector<std::unique_ptr<Piece>> next, Update* u);
  void index_all();
  bool check() const;
  bool reorder();
  const Where* find(char kind, std::string_view name) const;

  verifier::nft::NftState state_;
  bool valid_ = false;
  bool unordered_ = false;  ///< the object path created chains or sets out of creation order
  std::string failed_text_;  ///< the last text, when it did not apply
  std::vector<std::unique_ptr<Piece>> pieces_;  ///< the last text's parts, in order
  std::unordered_map<std::string_view, Where> index_[3];  ///< every part's objects, per kind
  std::string family_, table_;
  size_t present_[3] = {0, 0, 0};
};

}  // namespace kpc::applier
