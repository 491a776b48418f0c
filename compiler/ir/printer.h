// The two text forms of the IR.
//  - Restore form: exactly what kube-proxy writes to iptables-restore (arguments
//    in written order, bare host addresses, "0x%08x" marks, comments quoted only
//    when they contain a space, 10-digit probabilities). The compiler's only printer.
//  - Save form: what iptables-save prints for a rule (canonical argument order,
//    "/32" host masks, "0x%x" marks, --set-xmark, 11-digit probabilities, default
//    target options spelled out). Used to compare states with the kernel.
#pragma once

#include <string>

#include "compiler/ir/program.h"

namespace kpc::ir {

/// Appends "-A CHAIN <args> <target>" (no newline) in restore form.
void print_rule_restore(std::string& out, std::string_view chain, const Rule& rule);
/// Appends the whole program in restore form.
void print_program(std::string& out, const Program& program);
std::string print_program(const Program& program);

/// Appends "-A CHAIN <args> <target>" (no newline) in iptables-save form.
void print_rule_save(std::string& out, const std::string& chain, const Rule& rule, IPFamily family);

/// Comment text safe to put on a rule line: printable ASCII without quotes or
/// backslashes. Names are validated upstream; this is the last line of defence.
bool is_safe_comment(std::string_view s);

}  // namespace kpc::ir
