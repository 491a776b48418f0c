// `kpc golden`: the programs compiled for each node, back end and family against the files
// of an expected directory. cmd_golden.cpp runs the command; golden_report.cpp explains a
// difference (the byte diff; by Service: the behavioural diff of two iptables programs,
// the object summary of two nft programs) and prints the reports.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/driver/backend.h"
#include "compiler/support/net.h"

namespace kpc::cli::golden {

enum class Status { Equal, Differs, Missing, New, Changed, Unchanged };
const char* status_name(Status s);

struct ServiceRow {
  std::string service;  ///< "ns/name:port"; "(no service)" / "" for what no Service is named on
  std::string words;
};

struct FileResult {
  std::string node;
  Target target;
  std::string file;  ///< "iptables-ipv4.restore", ...: DIR/<node>/<file>
  std::string path;  ///< DIR/<node>/<file> as shown and written
  std::string compiled;
  Status status = Status::Equal;
  std::vector<IPAddr> local_addresses;  ///< the node's (iptables behaviour)
  // For a file that differs:
  std::string byte_diff;
  bool by_object = false;       ///< the Service rows are by nft object, not by behaviour
  std::string summary_note;     ///< said instead of (or above) the rows
  std::vector<ServiceRow> services;
  size_t more_services = 0;     ///< rows left out (ExplainOptions::max_services)
  bool internal_error = false;  ///< the behavioural comparison's self-check failed (a kpc bug)
};

struct ExplainOptions {
  size_t context = 3;
  size_t max_diff_lines = 40;
  size_t max_services = 25;  ///< Service rows shown per file; the rest is counted
};
/// Fills byte_diff, services and summary_note of a file whose expected text differs.
void explain(FileResult& f, std::string_view expected, const ExplainOptions& o);

/// What a program file is called: iptables-ipv4.restore, nftables-ipv6.nft, fastpath.nft.
std::string golden_file_name(Target t);

std::string report_text(const std::vector<FileResult>& files, const std::string& title);
std::string report_markdown(const std::vector<FileResult>& files, const std::string& title);
/// --update: new / changed / unchanged per file.
std::string update_text(const std::vector<FileResult>& files, bool markdown);

}  // namespace kpc::cli::golden
