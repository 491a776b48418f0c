// A rule set named on the command line (diff's sides, trace's RULES): an iptables-save
// dump or a restore program, or a snapshot (a YAML/JSON file or a directory), which is
// compiled first so that its Node's addresses are known. A file is read once —
// size-checked before it is read, mapped if regular — and told apart by its first
// line, which is what lets it be a pipe (`kpc diff <(iptables-save) new.restore`).
#include <cstdio>
#include <filesystem>

#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "verifier/trace/local_addresses.h"

namespace kpc::cli {

// A rule file's first line that is not blank or a comment starts a table ("*nat"). A text
// with no such line is an empty rule set (what iptables-save prints on a node without
// tables); as a snapshot it could never compile (no node).
bool looks_like_rules(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t e = text.find('\n', i);
    std::string_view line(text.data() + i, (e == std::string::npos ? text.size() : e) - i);
    i = e == std::string::npos ? text.size() : e + 1;
    if (line.empty() || line[0] == '#') continue;
    return line[0] == '*';
  }
  return true;
}

bool open_rule_input(const std::string& path, uint64_t limit, RuleInput* in) {
  in->path = path;
  std::error_code ec;
  in->directory = path != "-" && std::filesystem::is_directory(path, ec);
  if (in->directory) return true;
  InputError err;
  if (!in->text.load(path, limit, &err)) {
    print_input_error(err);
    return false;
  }
  in->rules = looks_like_rules(in->text.view());
  return true;
}

bool read_rule_input(RuleInput& in, const RuleInputOptions& o, verifier::RulesetState* out,
                     std::vector<IPAddr>* node_addresses, std::shared_ptr<verifier::RuleStore> store) {
  IPFamily family = backend_family(o.backend);
  if (in.rules) {
    std::string error;
    if (!read_state_text(in.text.view(), in.path, family, o.flavor, out, &error, store)) {
      print_error(error);
      return false;
    }
    return true;
  }
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  lo.node_name = o.node;
  bool ok = false;
  if (in.directory) {
    ok = load_snapshot({in.path}, lo, sm, &snap, diags);
  } else {
    std::string name = in.path == "-" ? "<stdin>" : in.path;
    std::vector<std::pair<std::string, std::string>> files{{name, std::string(in.text.view())}};
    in.text.reset();  // the loader keeps its own copy
    ok = load_snapshot_text(files, lo, sm, &snap, diags);
  }
  std::optional<CompileResult> c;
  if (ok) ok = check_configured_mode(snap, o.backend_given, o.backend, diags);
  if (ok) c = compile_iptables(snap, o.backend, {}, diags);
  if (c) append_node_addresses(snap, family, node_addresses);
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (!c) return false;
  *out = verifier::RulesetState::empty(family, store);
  verifier::ApplyOptions ao;
  ao.noflush = true;
  ao.flavor = o.flavor;
  if (auto res = verifier::apply_text(*out, c->text, ao); !res.ok()) {
    print_error("internal error: the compiled program fails: " + res.error->reason);
    return false;
  }
  return true;
}

std::vector<IPAddr> local_addresses_of(const verifier::RulesetState& state, std::vector<std::string>* reasons) {
  std::vector<IPAddr> out;
  for (const auto& a : verifier::trace::infer_local_addresses(state)) {
    out.push_back(a.address);
    if (reasons) reasons->push_back(a.address.str() + ": " + a.reason);
  }
  return out;
}

bool read_ipsets(const std::string& path, uint64_t limit, verifier::ipset::Table* out) {
  InputText text;
  InputError err;
  if (!text.load(path, limit, &err)) {
    print_input_error(err);
    return false;
  }
  std::string error;
  if (!verifier::ipset::parse_save(text.view(), out, &error)) {
    std::fprintf(stderr, "%s:%s\n", path.c_str(),
                 (error.substr(0, error.find(':')) + ": error[E0802]:" + error.substr(error.find(':') + 1)).c_str());
    return false;
  }
  return true;
}

CLI::Option* add_ipsets_option(CLI::App* cmd, std::string& path) {
  return cmd->add_option("--ipsets", path,
                         "the node's ipsets (`ipset save` output): -m set --match-set is decided on them (else it is "
                         "an unknown the verdicts name)");
}

}  // namespace kpc::cli
