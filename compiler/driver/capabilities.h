// The capability matrix: every kpc command × mode × input form, and what it does there — works,
// works by sample (the concrete tracer's representative packets, not a per-class proof), or is
// refused with the reason and what to use instead. One table: the commands ask it before they
// refuse (so a refusal always says the same), `kpc __capabilities` prints it into
// docs/capabilities.md, and one table-driven test runs every cell's example on the bundled example
// cluster (tests/unit/capability_matrix_test.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kpc {

enum class Support { Works, Sampled, Refused };

/// Input forms: how the thing a command reads is given.
inline constexpr std::string_view kSnapshotDir = "snapshot directory";
inline constexpr std::string_view kSnapshotFile = "snapshot file";
inline constexpr std::string_view kProgram = "program";
inline constexpr std::string_view kNodeState = "node state";
inline constexpr std::string_view kStdin = "stdin";

struct Capability {
  std::string_view command;  ///< "diff", "ipvs drain-plan"
  std::string_view mode;     ///< "iptables", "ip6tables", "nftables", "nftables (IPv6)", "fastpath", "ipvs", "any"
  std::string_view input;    ///< one of the input forms above
  Support support = Support::Works;
  /// Works: what it does. Refused: why, and what to use instead (printed as the refusal).
  std::string_view note;
  /// The cell's example on the bundled example cluster, without "kpc": placeholders in braces name
  /// the test's inputs (tests/unit/capability_matrix_test.cpp: {ex} the example, {ex-nft} it in
  /// nftables mode, {ipt} its iptables program, {nft-list} an nft listing of its state, ...); a
  /// last word "<{x}" feeds {x} on stdin.
  std::string_view example;
  int exit_code = 0;         ///< the example's exit status
  std::string_view expect;   ///< a piece of its output (stdout, or stderr when refused)
};

/// Every cell, in the order the docs list them (by command, then mode, then input form).
const std::vector<Capability>& capabilities();

/// The cell, or nullptr.
const Capability* find_capability(std::string_view command, std::string_view mode, std::string_view input);

/// The refusal to print when the cell is refused ("error[E0704]: kpc CMD: MODE, INPUT: NOTE"), else "".
std::string refusal(std::string_view command, std::string_view mode, std::string_view input);

/// docs/capabilities.md's generated part: a table per command (rows: modes; columns: input forms).
std::string capabilities_markdown();

}  // namespace kpc
