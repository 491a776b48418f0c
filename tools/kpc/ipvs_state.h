// --prior-state DIR for the ipvs back end (issue 17 §2): the node's IPVS table, connection
// counts and ipsets, read by the verifier's independent readers and converted here into the
// compiler's input (compiler/ipvs/sync.h), so the compiler never depends on the verifier.
//   DIR/ipvs.save     `ipvsadm -S -n` (required)
//   DIR/ipvs.stats    `ipvsadm -Ln` (optional: without it every count is unknown, read as live)
//   DIR/ipset.save    `ipset save` (optional: without it ipset.rules is the full program)
//   DIR/iptables.save `iptables-save` / `ip6tables-save` (optional: read by the caller)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ipvs/sync.h"

namespace kpc::cli {

/// False with *error set to the diagnostic line to print ("PATH:LINE: error[E0900]: ...").
bool read_ipvs_prior_state(const std::string& dir, IPFamily family, uint64_t max_input_size, ipvs::PriorState* out,
                           std::string* error);

/// The conversions (ipvs_prior.cpp, a library the tests link): `ipvsadm -S -n` text (and
/// `ipvsadm -Ln` when have_stats), `ipset save` text, read by the verifier's readers. False
/// with *error = "ipvs.save:LINE: error[E0900]: ..." (ipvs.stats, ipset.save likewise).
bool ipvs_prior_from_text(std::string_view save, std::string_view stats, bool have_stats, ipvs::PriorState* out,
                          std::string* error);
bool ipset_prior_from_text(std::string_view save, std::vector<ipvs::PriorSet>* out, std::string* error);

}  // namespace kpc::cli
