// `--format json` of every subcommand: one document on stdout, its first key
// "schema": "kpc.dev/<kind>/v1" (schemas/output/<kind>.schema.json), its diagnostics
// included. Every diagnostic the tool prints goes through print_diagnostics /
// print_input_error / print_error, which write it to stderr as always and record it, so
// a document lists the warnings of a run that succeeded, and a run that fails with no
// document of its own ends with a kpc.dev/error/v1 document (main.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "compiler/support/diag.h"
#include "compiler/support/input.h"

namespace kpc::cli {

/// Renders every diagnostic of sink to stderr and records it.
void print_diagnostics(const DiagSink& sink, const SourceManager& sm);
/// The same for an input error (E0001/E0002/...).
void print_input_error(const InputError& e);
/// An error line without a code or location ("kpc trace: --src: not an IP address: x"): printed
/// to stderr as given and recorded with that message.
void print_error(const std::string& line);

/// An error as another tool prints it (nft's "FILE:LINE:COL: Error: ..." with its source and marker
/// lines): printed to stderr as rendered, recorded with its location and message (uncoded: the
/// words are the real tool's), the source and marker lines as a note.
void print_tool_error(const std::string& rendered, const std::string& file, int line, int column,
                      const std::string& message);

/// While one exists, what this thread's print_* calls would print to stderr and record is held
/// instead, in order, until flush(): work done on two threads (the two sides of a cross-mode
/// diff) reports exactly as one thread doing it in sequence would. Not nested across threads:
/// each thread has its own.
class DeferredReports {
 public:
  DeferredReports();
  ~DeferredReports();  ///< stops holding (what was not flushed is dropped)
  DeferredReports(const DeferredReports&) = delete;
  DeferredReports& operator=(const DeferredReports&) = delete;
  /// Prints and records what was held, in order (on the calling thread, which must not be
  /// holding itself), and empties the list.
  void flush();
  struct Item {
    std::string stderr_text;
    nlohmann::ordered_json recorded;  ///< null: nothing recorded
  };
  std::vector<Item> items;  ///< internal
  /// Prints and records items taken from a DeferredReports of another thread.
  static void replay(std::vector<Item> items);
};

/// The diagnostics recorded so far, as JSON objects:
/// {code, name, severity, file, line, column, object, path, message, notes}.
nlohmann::ordered_json recorded_diagnostics();

/// {"schema": "kpc.dev/<kind>/v1"}: the start of every document.
nlohmann::ordered_json json_document(const std::string& kind);
/// A document finished: "diagnostics" added (recorded so far), printed to stdout.
void print_json(nlohmann::ordered_json doc);
/// A document a library produced as text (diff, verify, drift): its schema key kept first,
/// "diagnostics" added, printed to stdout.
void print_json_text(const std::string& text);
/// Whether a document has been printed (main prints the error document only when none was).
bool json_printed();
/// kpc.dev/error/v1: {schema, command, exit_code, diagnostics}.
void print_error_document(const std::string& command, int exit_code);

/// `--verbose` with --format json or markdown would be ignored (those always hold the detail):
/// a usage error, as every ignored flag is.
[[noreturn]] inline void throw_verbose_needs_text() {
  throw CLI::ValidationError("--verbose", "is for --format text (json and markdown always hold the detail)");
}

}  // namespace kpc::cli
