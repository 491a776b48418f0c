// The snapshot loader: files and directories of kubectl-style YAML/JSON in,
// one validated, sorted Snapshot out (or located diagnostics). Accepts
// multi-document YAML, single objects and `kind: List` (YAML or JSON); every
// file given together forms one snapshot. This is the model module's entry point.
#pragma once

#include <string>
#include <vector>

#include "compiler/model/doc.h"
#include "compiler/model/objects.h"
#include "compiler/support/diag.h"
#include "compiler/support/input.h"
#include "compiler/support/source.h"

namespace kpc {

struct LoadOptions {
  /// Bytes per file; larger files are refused before they are read (E0002). The CLI sets it
  /// from --max-input-size / KPC_MAX_INPUT_SIZE, the same limit as for rule files.
  size_t max_input_size = kDefaultMaxInputSize;
  ReadLimits limits;
  /// The node to compile for, as kube-proxy's --hostname-override flag (kpc's `--node NAME`):
  /// replaces KubeProxyConfiguration.hostnameOverride. It must name one of the snapshot's
  /// Nodes (else E0700, listing them); with no Node in the snapshot any valid name is taken.
  std::string node_name;
};

/// Applies a node override (LoadOptions::node_name) to a loaded snapshot: false, with E0700
/// naming the snapshot's Nodes (each with its position in a note), when no Node has that name.
bool select_node(Snapshot* snap, const std::string& name, const SourceManager& sm, DiagSink& diags);

/// Loads and validates paths (files, or directories scanned recursively for
/// *.yaml, *.yml, *.json in name order). Returns false if any error was reported.
/// Warnings may be reported on success.
bool load_snapshot(const std::vector<std::string>& paths, const LoadOptions& opts, SourceManager& sm,
                   Snapshot* out, DiagSink& diags);

/// Same, for in-memory text (tests, fuzzers, stdin). name is used in diagnostics.
bool load_snapshot_text(const std::vector<std::pair<std::string, std::string>>& files, const LoadOptions& opts,
                        SourceManager& sm, Snapshot* out, DiagSink& diags);

/// Expands directories into their snapshot files. Reports E0001 for unreadable paths.
std::vector<std::string> expand_inputs(const std::vector<std::string>& paths, DiagSink& diags);

}  // namespace kpc
