// What an input on a command line holds, told from its content (never from its name or how
// it was passed), and the one resolution of the mode every command and kpc-applier uses:
// explicit flags first, then the content of each input, then the snapshot's
// KubeProxyConfiguration.mode. A file, stdin, a FIFO or a process substitution give the same
// evidence: streams are read once and replayed (compiler/support/input.h), so looking at an
// input never consumes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/driver/backend.h"
#include "compiler/support/input.h"

namespace kpc {

enum class InputKind {
  Empty,           ///< nothing but blank lines and comments (a sync with nothing to do; an empty node)
  IptablesRules,   ///< an iptables-save dump or an iptables-restore program (first line "*table")
  NftRules,        ///< an nft transaction (`nft -f` input) or an `nft list` listing
  IpvsProgramSet,  ///< a directory holding ipvs.rules (`kpc compile --backend ipvs -o DIR`), or that file
  Snapshot,        ///< cluster state: a YAML/JSON file or a directory of them
};

/// "an iptables rule file", "an nft transaction or listing", ...: how messages name a kind.
const char* input_kind_phrase(InputKind k);

/// An input as classified: what it is and where that was seen.
struct InputEvidence {
  std::string name;    ///< as given ("-" is shown as "<stdin>")
  InputKind kind = InputKind::Empty;
  bool directory = false;
  bool listing = false;  ///< NftRules: an `nft list` listing (a node's state), not a transaction
  int line = 0;        ///< the line that told (1-based); 0 for a directory or an empty input
  std::string seen;    ///< that line, cut to 60 bytes (for messages)
  /// iptables: "(nf_tables)" or "(legacy)" in an iptables-save header names the flavour the
  /// node runs; nullopt when the text does not say.
  std::optional<bool> iptables_nft_flavor;
  /// The mode the content is of (nullopt: empty input or a snapshot, whose configuration decides).
  std::optional<BackendKind> mode() const;
  /// "FILE:LINE (`seen`)" or "FILE": where the evidence is.
  std::string where() const;
};

/// Classifies a text read already.
InputEvidence classify_text(std::string_view text, std::string name);

/// Opens and classifies path ("-": stdin). A regular file is looked at from its start only; a
/// stream is read whole, once (later reads replay it). False with *err on an unreadable input.
bool classify_input(const std::string& path, uint64_t limit, InputEvidence* out, InputError* err);

/// The mode a snapshot's KubeProxyConfiguration names (iptables when it names none), read
/// without compiling: only the files holding a KubeProxyConfiguration are parsed, and not even
/// those when they never say "nftables" or "ipvs". nullopt when they do not load (the
/// command's own load reports why).
std::optional<BackendKind> snapshot_mode(const std::string& path, uint64_t limit, const std::string& node);

/// What decides the mode of one command's inputs.
struct ModeRequest {
  std::string command;                  ///< "kpc diff" (for messages)
  std::optional<BackendKind> flag;      ///< --backend (ip6tables is iptables here)
  std::string flag_text;                ///< "--backend nftables" (for messages)
  std::vector<InputEvidence> inputs;    ///< every input, in command-line order
  /// Sides of different modes are a question of their own (a cross-mode diff), not an error.
  bool mixed_allowed = false;
  /// --flavor given: true nft, false legacy.
  std::optional<bool> flavor_flag;
};

struct ModeDecision {
  /// The mode of every program input: the flag's, else the content's. nullopt: no flag and no
  /// input says (only snapshots and empty inputs): the snapshot's configuration decides.
  std::optional<BackendKind> mode;
  std::string decided_by;  ///< "--backend nftables", "the content of a.nft:1", ...
  bool mixed = false;      ///< mixed_allowed and the inputs' modes differ (each input keeps its own)
  /// iptables' restore semantics: --flavor, else what an iptables-save header says
  /// ("(nf_tables)": iptables-nft), else legacy.
  bool iptables_nft_flavor = false;
  std::string flavor_decided_by;  ///< "" (the default), "--flavor", or where a header said it
};

/// Resolves. False with *error set (one message, several lines, no trailing newline) when an
/// input contradicts the flag, or inputs disagree and mixed is not allowed: what was seen
/// where, and what to use instead.
bool resolve_mode(const ModeRequest& r, ModeDecision* out, std::string* error);

}  // namespace kpc
