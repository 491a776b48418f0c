// Reading a node state for --state / --prior-state: an iptables-save dump, or a
// restore program (applied with --noflush to an empty node), as users have either.
#include "tools/kpc/commands.h"

namespace kpc::cli {

bool read_state(const std::string& path, IPFamily family, verifier::Flavor flavor, verifier::RulesetState* out,
                std::string* error) {
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const std::exception& e) {
    *error = std::string("error[E0001]: ") + e.what();
    return false;
  }
  *out = verifier::RulesetState::empty(family);
  std::string save_error;
  if (verifier::load_save(text, family, flavor, *out, &save_error)) return true;
  *out = verifier::RulesetState::empty(family);
  verifier::ApplyOptions ao;
  ao.noflush = true;
  ao.flavor = flavor;
  if (auto res = verifier::apply_text(*out, text, ao); !res.ok()) {
    *error = path + ":" + std::to_string(res.error->line) + ": error[E0900]: " + res.error->reason;
    return false;
  }
  return true;
}

}  // namespace kpc::cli
