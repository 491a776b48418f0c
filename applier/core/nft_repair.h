// nftables drift repair (issue 14 §2): given what a node's nftables really holds (an
// `nft list ruleset` / `nft list table` listing, or a script applied to an empty state,
// read by the nft model) and kube-proxy's full transaction for the desired snapshot
// (knftables' text, as the nftables back end writes it), write the smallest `nft -f`
// transaction that brings the node's `kube-proxy` table of the family to the desired state.
//
//  * desired = the full transaction applied to an empty state by the nft model
//    (verifier/nft); actual = the node's state. Only table FAMILY kube-proxy is compared and
//    written; every other table (another family's kube-proxy, a CNI's, a user's) is never
//    touched.
//  * Object by object: chains whose rules (canonical text, as nft lists them) are equal are
//    left alone; chains that differ are flushed and rewritten; missing chains and sets are
//    added; chains and sets the desired table lacks are deleted; a chain whose properties
//    the kernel cannot change in place (hook, type, priority, device, comment, base or not)
//    and a set with another type, flags, timeout, size, policy or comment are deleted and
//    re-created (whatever references them is rewritten around that); elements missing are
//    added, extra ones deleted, ones with another value or comment deleted and re-added; a
//    base chain's policy is set in place. A table comment or flags cannot be changed in
//    place (nft ignores them on an existing table): the table is deleted and re-created.
//  * Elements of dynamic sets (kube-proxy's affinity sets: the packet path fills them) are
//    not kube-proxy's writing and are neither compared nor touched.
//  * The repair is written in knftables' syntax, rules with the desired transaction's own
//    text, and ordered so that nft accepts it: element deletions, flushes, set deletions,
//    chain deletions, then chains and sets, rules, elements.
//  * It is checked before it is returned: applied by the model to the actual state, the
//    table must equal the desired table (objects, properties, rules per chain in order,
//    elements; creation order and handles aside) and every other table must be unchanged —
//    else no repair (ok = false): none is better than a wrong one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "verifier/nft/nft.h"

namespace kpc::applier {

struct NftRepairStats {
  size_t chains_kept = 0;       ///< desired chains already identical (and left alone)
  size_t chains_rewritten = 0;  ///< existing chains flushed and rewritten
  size_t chains_created = 0;    ///< desired chains the node lacked
  size_t chains_recreated = 0;  ///< deleted and created again (properties nft cannot change in place)
  size_t chains_deleted = 0;    ///< chains the desired table lacks
  size_t policies_set = 0;      ///< base chains whose policy is set in place
  size_t rules_written = 0;
  size_t sets_kept = 0;         ///< desired sets/maps with identical properties
  size_t sets_created = 0;
  size_t sets_recreated = 0;
  size_t sets_deleted = 0;
  size_t elements_added = 0;
  size_t elements_deleted = 0;
  bool table_created = false;   ///< the node had no such table
  bool table_recreated = false; ///< its comment or flags differed: deleted and created again
  size_t operations = 0;        ///< commands in the repair (nft counts each line)
};

struct NftRepairResult {
  bool ok = false;
  std::string transaction;  ///< the repair, `nft -f` input ("" when the node is already right)
  std::string error;        ///< why no repair could be produced
  NftRepairStats stats;
};

/// actual: the node's state. desired_transaction: kpc's full nftables transaction for the
/// snapshot (applied to an empty state, it gives the desired table). family/table: the
/// table to repair (kube-proxy's: ip or ip6, "kube-proxy").
NftRepairResult repair_nft(const verifier::nft::NftState& actual, std::string_view desired_transaction,
                           verifier::nft::Family family, std::string_view table = "kube-proxy");

/// Reads a node's nftables state: `nft list ruleset` / `nft list table` output (with or
/// without -a handles), or a script applied to an empty state. False with *error set (nft's
/// messages, located in file_name) when the text is neither.
///
/// only_table: read only that table's block of a listing (the other blocks are blanked, so
/// that line numbers stay right): a node's other tables (a CNI's, firewalld's) may hold what
/// the model does not read (interval or typeof sets, ...), and the repair never touches them.
struct TableName {
  verifier::nft::Family family = verifier::nft::Family::Ip;
  std::string name = "kube-proxy";
};
bool read_nft_state(std::string_view text, std::string_view file_name, verifier::nft::NftState* out,
                    std::string* error, const TableName* only_table = nullptr);

/// The differences between two tables (objects by name, properties, rules per chain in order,
/// elements of non-dynamic sets), one line each, at most `max` lines; empty when they are
/// equal. A missing table (nullptr) differs from any table.
std::vector<std::string> nft_table_differences(const verifier::nft::Table* want, const verifier::nft::Table* got,
                                               size_t max = 20);

}  // namespace kpc::applier
