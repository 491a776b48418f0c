// `kpc trace` on nftables input (issue 16 §4): a knftables transaction (what `kpc compile
// --backend nftables` writes), an `nft list ruleset` / `nft list table` dump, or a snapshot
// compiled with the nftables back end first. cmd_trace.cpp decides the back end (from the
// file's content, or --backend) and hands the request here.
#pragma once

#include <cstdint>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

namespace kpc::cli {

struct NftTraceRequest {
  std::string rules;  ///< path ("-": stdin)
  std::optional<std::string_view> text;  ///< RULES' content when the caller read it already
  std::string src, dst, proto, from;
  int dport = -1, sport = -1;
  std::vector<std::string> local_addresses;
  std::string in_iface, out_iface, mark, ctstate;
  std::vector<std::string> affinity;
  uint32_t affinity_age = 0;
  std::string format;
  size_t max_outcomes = 100000;
  std::vector<std::string> expect_dnat;
  std::string expect_verdict, expect_masquerade;
  uint64_t max_input_size = 0;
  std::string node;
  std::string kube_proxy_version = "1.35";
  bool kernel_numgen = false;  ///< --numgen kernel
  bool verbose = false;        ///< text at full width (else lines of at most 100 columns)
};

/// True when text's first command (blank lines and '#' comments skipped) is an nft command
/// or a table block: "add ...", "flush ...", "table ip kube-proxy {", ...
bool looks_like_nft(std::string_view text);

/// Runs the trace; the exit code (0 traced, 1 an --expect-* assertion failed, 2 bad input).
int run_trace_nft(const NftTraceRequest& r);

}  // namespace kpc::cli
