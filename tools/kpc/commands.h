// kpc's subcommands. Each registers its CLI11 options and returns the exit code
// through a shared int: 0 ok/same, 1 differences found, 2 error (diff's convention).
// The tool stays thin: option parsing and printing here, all work in the libraries.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "compiler/driver/backend.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/input_kind.h"
#include "compiler/iptables/lower.h"
#include "compiler/model/objects.h"
#include "compiler/support/input.h"
#include "tools/cli_docs/cli_checks.h"
#include "tools/kpc/json_report.h"
#include "verifier/ipset/ipset.h"
#include "verifier/state/state.h"

namespace kpc::cli {

constexpr int kExitOk = 0;
constexpr int kExitDifferent = 1;
constexpr int kExitError = 2;
constexpr int kExitInternal = 3;  ///< a bug in kpc (never expected; tests fail on it)

void add_validate(CLI::App& app, int& exit_code);
void add_compile(CLI::App& app, int& exit_code);
void add_simulate(CLI::App& app, int& exit_code);
void add_trace(CLI::App& app, int& exit_code);

/// The options several commands share, each restricted to its values and showing its default.
CLI::Option* add_backend_option(CLI::App* cmd, std::string& backend, const char* help = "iptables or ip6tables");
CLI::Option* add_flavor_option(CLI::App* cmd, std::string& flavor, const char* help);
CLI::Option* add_format_option(CLI::App* cmd, std::string& format);

/// A node state from an iptables-save dump or a restore program (applied to an empty node),
/// read with the --max-input-size limit. With a store, the state interns its rules there
/// (states that share a store compare by rule ids, and lines read before are not parsed
/// again). False with *error set to the diagnostic line(s) to print.
bool read_state(const std::string& path, IPFamily family, verifier::Flavor flavor, uint64_t max_input_size,
                verifier::RulesetState* out, std::string* error, std::shared_ptr<verifier::RuleStore> store = nullptr);
/// The same, for a text read already; name is used in messages.
bool read_state_text(std::string_view text, const std::string& name, IPFamily family, verifier::Flavor flavor,
                     verifier::RulesetState* out, std::string* error,
                     std::shared_ptr<verifier::RuleStore> store = nullptr);
void add_verify(CLI::App& app, int& exit_code);
/// The node's addresses of a snapshot (node IP and non-loopback host addresses of the family).
void append_node_addresses(const Snapshot& snap, IPFamily family, std::vector<IPAddr>* out);
/// The local addresses for packet-level checks: --local-address values (checked for the family),
/// else the derived ones, else one stand-in address no rule names. False (message printed) on a bad value.
bool choose_local_addresses(const std::vector<std::string>& given, std::vector<IPAddr> derived, IPFamily family,
                            const char* command, std::vector<IPAddr>* out);
void add_diff(CLI::App& app, int& exit_code);
void add_drift(CLI::App& app, int& exit_code);
void add_golden(CLI::App& app, int& exit_code);
/// `kpc ipvs drain-plan` (cmd_ipvs.cpp).
void add_ipvs(CLI::App& app, int& exit_code);

/// One full sync of snap (its node chosen) for target, as `kpc compile` without --prior
/// writes it (cmd_compile.cpp); kube_proxy_version picks the nftables layout. nullopt with
/// the diagnostics reported.
std::optional<std::string> compile_program(const Snapshot& snap, Target target, const std::string& kube_proxy_version,
                                           DiagSink& diags);
/// Whether snap's node runs target's proxier: false with E0701 (no address of the family) or
/// the back end's configuration errors reported.
bool target_available(const Snapshot& snap, Target target, DiagSink& diags);


/// Without --backend the snapshot's KubeProxyConfiguration.mode decides, as on a node
/// (compiler/driver backend_for_mode): false, with E0702 reported, when it names a mode
/// kpc cannot compile yet. With --backend given, that back end is used as asked.
bool check_configured_mode(const Snapshot& snap, bool backend_given, Backend backend, DiagSink& diags);

/// The one resolution of the mode (compiler/driver/input_kind.h) as every command calls it:
/// --backend (when given) and --flavor (when given) as the flags, then the inputs' evidence.
/// False with the error printed. Without --flavor, a flavour an iptables-save header names is
/// taken into *flavor ("nft").
bool resolve_command_mode(const std::string& command, const std::string& backend, bool backend_given,
                          std::string* flavor, bool flavor_given, std::vector<InputEvidence> inputs,
                          bool mixed_allowed, ModeDecision* out);

/// Commands that read snapshots only (validate, compile, golden): true, with the capability
/// matrix's refusal printed (E0704), when an input is a program or a node's state instead.
bool refuse_non_snapshots(const char* command, const std::vector<std::string>& inputs, uint64_t limit);

/// `--max-input-size SIZE` (default 256 MiB, or KPC_MAX_INPUT_SIZE; "100M", "1GiB", ...;
/// a bad value is a usage error): the limit of every input file of the command.
CLI::Option* add_max_input_size_option(CLI::App* cmd, uint64_t& limit);

/// `--node NAME`: the node to compile for, as kube-proxy's --hostname-override (replaces
/// KubeProxyConfiguration.hostnameOverride; must name one of the snapshot's Nodes, else E0700
/// listing them). Goes to LoadOptions::node_name. all_help: extra text where `--node all` is read.
CLI::Option* add_node_option(CLI::App* cmd, std::string& node, const char* all_help = "");

/// A whole input file, read-only, checked against the limit before it is read
/// (compiler/support/input.h): a regular file is mapped (rule files are tens of megabytes:
/// no copy into a zero-filled buffer), anything else (stdin "-", pipes, FIFOs) is read
/// into memory, at most limit + 1 bytes of it.
class InputText {
 public:
  InputText() = default;
  ~InputText() { reset(); }
  InputText(const InputText&) = delete;
  InputText& operator=(const InputText&) = delete;
  /// Loads path ("-": stdin). False with *err set (E0001 with the OS's reason, or E0002).
  bool load(const std::string& path, uint64_t limit, InputError* err);
  std::string_view view() const {
    return map_ ? std::string_view(static_cast<const char*>(map_), size_) : owned_ ? std::string_view(*owned_) : "";
  }
  void reset();

 private:
  std::shared_ptr<const std::string> owned_;  ///< a stream's bytes (kept for its replay: InputFd)
  void* map_ = nullptr;
  size_t size_ = 0;
};

/// Writes text to stdout for "" / "-", else to path without ever damaging what path is
/// (output.cpp): a regular file (or a new one, or a symlink's target) is replaced
/// atomically, keeping its mode; a device, FIFO, socket or /dev/fd/N is written directly.
/// False (error[E0005] naming path and the OS's reason printed) on failure; a file
/// that was to be replaced is then untouched.
bool write_output(const std::string& path, const std::string& text);
/// `--stats`: chains written/deleted, rules, bytes (to stderr).
void print_stats(const iptables::SyncResult& r, size_t bytes);

/// A rule set named on the command line: a rule file (iptables-save dump or restore
/// program) or a snapshot, compiled first (tools/kpc/rule_input.cpp).
struct RuleInput {
  std::string path;
  bool directory = false;  ///< a snapshot directory
  bool rules = false;      ///< a rule file (else a snapshot file)
  InputText text;
};
struct RuleInputOptions {
  Backend backend = Backend::IPTables;
  bool backend_given = false;
  verifier::Flavor flavor = verifier::Flavor::Legacy;
  uint64_t max_input_size = 0;
  std::string node;  ///< --node: LoadOptions::node_name of a snapshot side
};
/// True when text's first line that is not blank or a comment starts a table ("*nat").
bool looks_like_rules(std::string_view text);
/// Opens (reads, size-checked) and classifies; false with the error printed.
bool open_rule_input(const std::string& path, uint64_t limit, RuleInput* in);
/// The state it gives; a snapshot is compiled (its Node's addresses appended to
/// node_addresses). False with diagnostics printed.
bool read_rule_input(RuleInput& in, const RuleInputOptions& o, verifier::RulesetState* out,
                     std::vector<IPAddr>* node_addresses, std::shared_ptr<verifier::RuleStore> store = nullptr);
/// The node addresses a rule set names (verifier/trace/local_addresses.h), with "ADDR: why" lines.
std::vector<IPAddr> local_addresses_of(const verifier::RulesetState& state, std::vector<std::string>* reasons);

/// `--ipsets FILE` (`ipset save` output): read, size-checked; false with a located E0802
/// (or the read error) printed.
bool read_ipsets(const std::string& path, uint64_t limit, verifier::ipset::Table* out);
CLI::Option* add_ipsets_option(CLI::App* cmd, std::string& path);

}  // namespace kpc::cli
