// nftables in-process: the library the `nft` tool is built on (libnftables, Debian
// `libnftables-dev`), so that an apply or a read costs no fork/exec of `nft`. The text in and the
// text out are the tool's: the same parser, the same netlink batch, the same listing printer —
// and error messages rewritten to name `/dev/stdin`, as `nft -f -` names its input, so that a
// rejected transaction reports exactly what the tool reports.
//
// Each call makes its own context (and netlink socket): a socket belongs to the network
// namespace of the thread that opens it, and the applier's tests switch namespaces per thread.
#pragma once

#include <string>

namespace kpc::applier {

struct NftLibResult {
  int exit_code = 0;  ///< 0 ok; 1 as `nft` exits on an error
  std::string out, err;
};

/// `nft -f -` with program on stdin: one transaction, all or nothing.
NftLibResult nft_lib_apply(const std::string& program);
/// `nft COMMAND` (e.g. "list table ip kube-proxy"): the command as one line.
NftLibResult nft_lib_command(const std::string& command);

}  // namespace kpc::applier
