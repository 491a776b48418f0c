// `kpc golden`'s explanations and reports (golden.h).
#include <algorithm>

#include "applier/core/nft_objects.h"
#include "compiler/support/line_diff.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/golden.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_sym/compare.h"
#include "verifier/nft_sym/verify.h"
#include "verifier/sem/report.h"
#include "verifier/symbolic/compare.h"
#include "verifier/trace/tracer.h"

namespace kpc::cli::golden {
namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The Service rows of a behavioural comparison (expected -> compiled), whatever the mode.
void rows_from(FileResult& f, const verifier::sem::CompareResult& r) {
  f.internal_error = !r.self_check_failures.empty();
  if (r.equivalent()) {
    f.summary_note = "no packet is treated differently: the programs differ in text only";
    return;
  }
  verifier::sem::ReportOptions ro;
  ro.before_name = "expected";
  ro.after_name = "compiled";
  for (const auto& c : verifier::sem::service_changes(r, ro))
    f.services.push_back({c.service, c.words + " (" + std::to_string(c.classes) + (c.classes == 1 ? " class" : " classes") +
                                         (c.undecided ? ", " + std::to_string(c.undecided) + " undecided" : "") + ")"});
  if (r.sampled) f.summary_note = "a sample of the destinations was explored";
}

// By Service, from the behaviour of the two programs: `kpc diff`'s comparison and its summary in words.
void explain_iptables(FileResult& f, std::string_view expected) {
  auto store = std::make_shared<verifier::RuleStore>();
  verifier::RulesetState before, after;
  std::string err;
  if (!read_state_text(expected, f.path, f.target.family, verifier::Flavor::Legacy, &before, &err, store)) {
    f.summary_note = "no behavioural diff: the expected file is not a program iptables-restore accepts: " + first_line(err);
    return;
  }
  if (!read_state_text(f.compiled, "compiled", f.target.family, verifier::Flavor::Legacy, &after, &err, store)) {
    f.summary_note = "internal error: the compiled program does not apply: " + first_line(err);
    f.internal_error = true;
    return;
  }
  for (auto* st : {&before, &after})  // restore programs hold no jumps from the built-in chains: kube-proxy's
    if (verifier::trace::builtin_chains_empty(*st) && !verifier::trace::add_kube_proxy_jumps(*st, &err)) {
      f.summary_note = "no behavioural diff: cannot add kube-proxy's jumps: " + first_line(err);
      return;
    }
  verifier::sem::CompareOptions co;
  co.local_addresses = f.local_addresses;
  rows_from(f, verifier::symbolic::compare_states(before, after, co));
}

// By Service, from the behaviour of two nftables programs: the nft model builds both states and
// its symbolic front end compares them, as `kpc diff old.nft new.nft` does.
void explain_nft_behaviour(FileResult& f, std::string_view expected) {
  verifier::nft::NftState before, after;
  verifier::nft::NftError err;
  if (!verifier::nft_sym::read_nft_state(expected, f.path, &before, &err)) {
    f.summary_note = "no behavioural diff: the expected file is not a transaction nft accepts: " + err.to_string();
    return;
  }
  if (!verifier::nft_sym::read_nft_state(f.compiled, "compiled", &after, &err)) {
    f.summary_note = "internal error: the compiled transaction does not apply: " + err.to_string();
    f.internal_error = true;
    return;
  }
  verifier::sem::CompareOptions co;
  co.local_addresses = f.local_addresses;
  rows_from(f, verifier::nft_sym::compare_nft(before, after, co));
}

// By Service, from the objects the fast-path table names: it holds flowtable offload rules, not
// kube-proxy's service dataplane, so there is no Service behaviour to compare.
void explain_nft(FileResult& f, std::string_view expected) {
  f.by_object = true;
  auto changes = applier::nft_object_changes(expected, f.compiled);
  for (const auto& c : changes) f.services.push_back({c.service.empty() ? "(no Service)" : c.service, applier::nft_change_words(c)});
  if (changes.empty()) f.summary_note = "no object added or removed: the same lines in another order";
  else if (f.target.kind == BackendKind::FastPath)
    f.summary_note = "the fast-path table names no Service: its elements are shown as they are";
}

std::string indent(const std::string& text, const char* pad) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t e = text.find('\n', i);
    if (e == std::string::npos) e = text.size() - 1;
    out += pad + text.substr(i, e - i + 1);
    i = e + 1;
  }
  return out;
}

std::string cell(std::string s) {  // a Markdown table cell: no pipe or newline breaks the row
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out;
}

std::string fence_for(const std::string& text) {  // longer than any run of backquotes inside
  size_t run = 0, best = 0;
  for (char c : text) run = c == '`' ? run + 1 : 0, best = std::max(best, run);
  return std::string(std::max<size_t>(3, best + 1), '`');
}

std::string counts(const std::vector<FileResult>& files) {
  size_t n[6] = {};
  for (const auto& f : files) ++n[static_cast<int>(f.status)];
  std::string s = std::to_string(files.size()) + (files.size() == 1 ? " file" : " files") + ": ";
  std::vector<std::string> parts;
  const char* names[] = {"equal", "differ", "missing", "new", "changed", "unchanged"};
  for (int i = 0; i < 6; ++i)
    if (n[i]) parts.push_back(std::to_string(n[i]) + " " + (i == 1 && n[i] == 1 ? "differs" : names[i]));
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

const char* summary_heading(const FileResult& f) {
  return f.by_object ? "by Service, by object (the fast-path table's chains, sets and elements; it holds no Service "
                       "dataplane to compare by behaviour):"
                     : "by Service, by behaviour (kpc diff of the two programs; expected -> compiled):";
}

}  // namespace

const char* status_name(Status s) {
  switch (s) {
    case Status::Equal: return "equal";
    case Status::Differs: return "differs";
    case Status::Missing: return "missing";
    case Status::New: return "new";
    case Status::Changed: return "changed";
    case Status::Unchanged: return "unchanged";
  }
  return "?";
}

std::string golden_file_name(Target t) {
  if (t.kind == BackendKind::FastPath) return "fastpath.nft";
  return std::string(backend_kind_name(t.kind)) + (t.family == IPFamily::V4 ? "-ipv4" : "-ipv6") +
         (t.kind == BackendKind::IPTables ? ".restore" : ".nft");
}

void explain(FileResult& f, std::string_view expected, const ExplainOptions& o) {
  UnifiedDiffOptions u;
  u.context = o.context;
  u.max_lines = o.max_diff_lines;
  f.byte_diff = unified_diff(expected, f.compiled, f.path + " (expected)", "compiled", u);
  if (f.target.kind == BackendKind::IPTables) explain_iptables(f, expected);
  else if (f.target.kind == BackendKind::NFTables) explain_nft_behaviour(f, expected);
  else explain_nft(f, expected);
  if (f.services.size() > o.max_services) {
    f.more_services = f.services.size() - o.max_services;
    f.services.resize(o.max_services);
  }
}

std::string report_text(const std::vector<FileResult>& files, const std::string& title) {
  std::string out = title + ": " + counts(files) + "\n";
  for (const auto& f : files) {
    if (f.status == Status::Equal) continue;
    out += f.path + ": " + status_name(f.status);
    if (f.status == Status::Missing) {
      out += " (kpc golden --update writes it)\n";
      continue;
    }
    out += "\n  " + std::string(summary_heading(f)) + "\n";
    if (!f.summary_note.empty()) out += "    " + f.summary_note + "\n";
    for (const auto& s : f.services) out += "    " + s.service + ": " + s.words + "\n";
    if (f.more_services) out += "    ... and " + std::to_string(f.more_services) + " more Services\n";
    out += "  bytes:\n" + indent(f.byte_diff, "    ");
  }
  for (const auto& f : files)
    if (f.status == Status::Equal) out += f.path + ": equal\n";
  return out;
}

std::string report_markdown(const std::vector<FileResult>& files, const std::string& title) {
  std::string out = "### " + title + ": " + counts(files) + "\n\n";
  bool any = std::any_of(files.begin(), files.end(), [](const auto& f) { return f.status != Status::Equal; });
  if (any) {
    out += "| file | status | Service | change |\n| --- | --- | --- | --- |\n";
    for (const auto& f : files) {
      if (f.status == Status::Equal) continue;
      std::string file = "`" + f.node + "/" + f.file + "`";
      std::string status = std::string(status_name(f.status)) + (f.by_object ? " (by object)" : "");
      if (f.status == Status::Missing) {
        out += "| " + file + " | missing | | `kpc golden --update` writes it |\n";
        continue;
      }
      if (f.services.empty()) out += "| " + file + " | " + status + " | | " + cell(f.summary_note) + " |\n";
      for (const auto& s : f.services)
        out += "| " + file + " | " + status + " | " + cell(s.service) + " | " + cell(s.words) + " |\n";
      if (f.more_services)
        out += "| " + file + " | " + status + " | … | and " + std::to_string(f.more_services) + " more Services |\n";
    }
    if (std::any_of(files.begin(), files.end(), [](const auto& f) { return f.by_object; }))
      out += "\nRows marked *by object* come from the fast-path table's objects, not from packet behaviour "
             "(the table holds no Service dataplane).\n";
  }
  std::string equal;
  for (const auto& f : files)
    if (f.status == Status::Equal) equal += (equal.empty() ? "" : ", ") + ("`" + f.node + "/" + f.file + "`");
  if (!equal.empty()) out += "\nEqual: " + equal + "\n";
  std::string diffs;
  for (const auto& f : files) {
    if (f.byte_diff.empty()) continue;
    std::string fence = fence_for(f.byte_diff);
    diffs += "\n`" + f.node + "/" + f.file + "`:\n\n" + fence + "diff\n" + f.byte_diff + fence + "\n";
  }
  if (!diffs.empty()) out += "\n<details><summary>Byte diffs</summary>\n" + diffs + "\n</details>\n";
  return out;
}

std::string update_text(const std::vector<FileResult>& files, bool markdown) {
  std::string out;
  if (markdown) {
    out = "### kpc golden --update: " + counts(files) + "\n\n| file | status |\n| --- | --- |\n";
    for (const auto& f : files) out += "| `" + f.node + "/" + f.file + "` | " + status_name(f.status) + " |\n";
    return out;
  }
  for (const auto& f : files) out += std::string(status_name(f.status)) + " " + f.path + "\n";
  return out + "kpc golden --update: " + counts(files) + "\n";
}

}  // namespace kpc::cli::golden
