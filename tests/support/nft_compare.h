// kube-proxy's nftables test canonicalisation (sortNFTablesTransaction and
// assertNFTablesTransactionEqual in pkg/proxy/nftables/helpers_test.go), reimplemented
// from its description in fixtures/KUBEPROXY_NFT_TESTS.md. kube-proxy's nftables unit
// tests compare the expected text with the fake's Dump() only after this sort, so kpc's
// output is compared with the kubeproxy/nftables.dump fixtures the same way. Text in,
// text out; independent of kpc's compiler and verifier.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kpc::test {

/// sortNFTablesTransaction: splits on "\n"; drops empty lines and lines whose first
/// byte is '#'; stable-sorts the rest with kube-proxy's order: a line of fewer than 5
/// space-separated words is never "less"; otherwise by object type (word 2, the verb
/// in word 1 is not looked at: table > chain > rule > set > map > element > anything
/// else), then by object name (word 5, byte order); rules of the same chain keep their
/// order; other lines of the same type and name by the whole line. The sort is Go's
/// sort.SliceStable algorithm, so that inconsistent orders (two object types outside the
/// list, short lines) come out as in the Go helper too. Returns the lines joined with
/// "\n" (no final newline).
std::string sort_nftables_transaction(std::string_view text);

/// The first difference between two texts after sorting both (what
/// assertNFTablesTransactionEqual would report as a diff).
struct NftDiff {
  bool equal = true;
  size_t line = 0;            ///< 1-based line in the sorted texts; 0 when equal
  std::string expected;       ///< sorted expected line ("" past the end)
  std::string actual;         ///< sorted actual line ("" past the end)
  bool expected_ended = false;  ///< the expected text has no line `line`
  bool actual_ended = false;    ///< the actual text has no line `line`
  size_t expected_source_line = 0;  ///< 1-based line of `expected` in the unsorted expected input (0: none)
  size_t actual_source_line = 0;    ///< 1-based line of `actual` in the unsorted actual input (0: none)
};
NftDiff diff_nftables_transaction(std::string_view expected, std::string_view actual);
/// A one-paragraph message for a test failure ("" when equal).
std::string describe(const NftDiff& d);

/// Reorders Dump-style "add ..." lines into knftables' Fake.Dump() order, which is also
/// an order `nft -f` accepts (objects before their users): table lines; chains, sets,
/// maps each by name; rules grouped by chain in chain-name order (rule order within a
/// chain kept); elements of sets (by set name), then of maps (by map name), each
/// container's elements in input order; any other line last, in input order. Empty and
/// '#' lines are dropped. Ends with "\n" unless empty.
std::string nftables_dump_order(std::string_view text);

/// `nft list ruleset` text made comparable across histories (the kernel lists a table's
/// chains, sets and maps in creation order and elements in hash order, neither of which is
/// behaviour): each table's top-level blocks sorted by their text (header first), element
/// lists sorted by element, `# handle N` annotations dropped; rule order within a chain and
/// table order are kept.
std::string normalized_nft_listing(std::string_view text);

}  // namespace kpc::test
