// A restore program: what `iptables-restore` reads. Tables in input order,
// each a list of operations ended by COMMIT. The compiler emits programs; the
// verifier parses them (with line numbers) and applies them to a state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/rule.h"

namespace kpc::ir {

enum class OpKind : uint8_t {
  DeclareChain,  ///< ":NAME POLICY [p:b]" — creates, or flushes if it exists (with --noflush)
  Append,        ///< -A CHAIN rule
  Insert,        ///< -I CHAIN [num] rule
  Delete,        ///< -D CHAIN rule
  DeleteNum,     ///< -D CHAIN num
  Replace,       ///< -R CHAIN num rule
  NewChain,      ///< -N CHAIN
  DeleteChain,   ///< -X [CHAIN]
  Flush,         ///< -F [CHAIN]
  Zero,          ///< -Z [CHAIN]
  Policy,        ///< -P CHAIN POLICY
  Rename,        ///< -E OLD NEW
};

struct Op {
  OpKind kind;
  std::string chain;   ///< may be empty for -X/-F/-Z without a chain
  std::string arg;     ///< DeclareChain/Policy: policy ("-" for user chains); Rename: new name
  uint32_t num = 0;    ///< Insert/DeleteNum/Replace position (1-based; 0 = none given)
  Rule rule;           ///< Append/Insert/Delete/Replace
  uint32_t line = 0;   ///< 1-based line in the source text (0 when built by the compiler)
};

struct TableBlock {
  TableId table;
  std::vector<Op> ops;
  uint32_t line = 0;         ///< line of "*table"
  uint32_t commit_line = 0;  ///< line of COMMIT (0 = missing)
};

struct Program {
  IPFamily family = IPFamily::V4;
  std::vector<TableBlock> tables;
};

}  // namespace kpc::ir
