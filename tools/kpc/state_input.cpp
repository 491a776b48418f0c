// Reading a node state for --state / --prior-state: an iptables-save dump, or a
// restore program (applied with --noflush to an empty node), as users have either.
#include <algorithm>
#include <cstdio>

#include "compiler/proxy/node_context.h"
#include "tools/kpc/commands.h"

namespace kpc::cli {

bool read_state(const std::string& path, IPFamily family, verifier::Flavor flavor, uint64_t max_input_size,
                verifier::RulesetState* out, std::string* error, std::shared_ptr<verifier::RuleStore> store) {
  InputText file;
  InputError err;
  if (!file.load(path, max_input_size, &err)) {
    *error = render(err);
    return false;
  }
  return read_state_text(file.view(), path, family, flavor, out, error, std::move(store));
}

bool read_state_text(std::string_view text, const std::string& name, IPFamily family, verifier::Flavor flavor,
                     verifier::RulesetState* out, std::string* error, std::shared_ptr<verifier::RuleStore> store) {
  if (!store) store = std::make_shared<verifier::RuleStore>();
  *out = verifier::RulesetState::empty(family, store);
  std::string save_error;
  if (verifier::load_save(text, family, flavor, *out, &save_error, store)) return true;
  *out = verifier::RulesetState::empty(family, store);
  verifier::ApplyOptions ao;
  ao.noflush = true;
  ao.flavor = flavor;
  ao.discard_on_failure = true;
  if (auto res = verifier::apply_text(*out, text, ao); !res.ok()) {
    *error = name + ":" + std::to_string(res.error->line) + ": error[E0900]: " + res.error->reason;
    return false;
  }
  return true;
}

}  // namespace kpc::cli

namespace kpc::cli {

void append_node_addresses(const Snapshot& snap, IPFamily family, std::vector<IPAddr>* out) {
  DiagSink quiet;  // the snapshot compiled already: its diagnostics were printed then
  auto node = proxy::build_node_context(snap, family, quiet);
  if (!node) return;
  if (node->node_ip) out->push_back(*node->node_ip);
  for (const auto& a : node->host_addresses)
    if (!a.is_loopback()) out->push_back(a);
}

bool choose_local_addresses(const std::vector<std::string>& given, std::vector<IPAddr> derived, IPFamily family,
                            const char* command, std::vector<IPAddr>* out) {
  out->clear();
  if (given.empty()) *out = std::move(derived);
  for (const auto& s : given) {
    auto a = IPAddr::parse(s);
    if (!a || a->family != family) {
      std::fprintf(stderr, "kpc %s: --local-address: not an %s address: %s\n", command, family_name(family), s.c_str());
      return false;
    }
    out->push_back(*a);
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  if (out->empty())  // a node address no rule names: what any unnamed node address does
    out->push_back(*IPAddr::parse(family == IPFamily::V4 ? "192.0.2.254" : "2001:db8::fe"));
  return true;
}

bool check_configured_mode(const Snapshot& snap, bool backend_given, Backend backend, DiagSink& diags) {
  if (backend_given) return true;
  return backend_for_mode(snap, backend_family(backend), diags).has_value();
}

}  // namespace kpc::cli
