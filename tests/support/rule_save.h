// One rule line read by the verifier's parser and printed back as iptables-save prints
// it — the parser tests' way to state what the real tool accepts (save form) or refuses
// ("ERROR: " + the message the parser reports).
#pragma once

#include <string>
#include <string_view>

#include "compiler/ir/printer.h"
#include "verifier/parse/parser.h"

namespace kpc::test {

inline std::string rule_save(std::string_view text, IPFamily f = IPFamily::V4) {
  std::string chain, err, out;
  auto r = verifier::parse_rule_text(text, f, &chain, &err);
  if (!r) return "ERROR: " + err;
  ir::print_rule_save(out, chain, *r, f);
  return out;
}

}  // namespace kpc::test
