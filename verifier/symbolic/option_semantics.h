// What the packet semantics (the concrete tracer and the symbolic engine) make of
// every option the rule parser reads: the audit of issue 12. Each option is either
//  * Modelled  — part of the semantics: a packet's outcome depends on it, so a
//                difference in it is a difference ("differs" with a witness);
//  * NoOp      — changes nothing a packet's fate depends on (comments, counters,
//                logging, the eviction of *other* clients' stale recent entries);
//  * Unknown   — not modelled: a packet that meets it gets a three-valued Unknown
//                outcome naming it, so a difference in it is "cannot prove".
// Never silently equal. tests/unit/option_audit_test.cpp enumerates the parser's
// list (parse/parser.h known_options) and checks each entry's class by behaviour:
// a pair of rule sets that differ only in that option must compare as the class says.
#pragma once

#include <optional>
#include <string_view>

namespace kpc::verifier::symbolic {

enum class OptionMeaning : unsigned char { Modelled, NoOp, Unknown };
const char* option_meaning_name(OptionMeaning m);

struct OptionClass {
  OptionMeaning meaning = OptionMeaning::Unknown;
  const char* note = "";  ///< how it is modelled, or why it is a no-op / unknown
};

/// The class of a parser option (owner "" = base option such as "-p"; a module; a
/// typed target). nullopt: not in the table — the audit test fails on it.
std::optional<OptionClass> option_class(std::string_view owner, std::string_view option);

/// The class of a target extension name (a typed target or one kept as words).
OptionClass target_class(std::string_view name);

}  // namespace kpc::verifier::symbolic
