// Recording diagnostics for `--format json` (json_report.h). The tool is one command per
// process, single-threaded where it prints (work on a second thread holds its reports in a
// DeferredReports and the main thread flushes them): a process-wide list is enough.
#include "tools/kpc/json_report.h"

#include <cstdio>
#include <vector>


namespace kpc::cli {

namespace {

std::vector<nlohmann::ordered_json>& recorded() {
  static std::vector<nlohmann::ordered_json> list;
  return list;
}
bool printed = false;
thread_local DeferredReports* t_deferred = nullptr;

// Every print_* ends here: stderr and the recorded list, or this thread's deferral.
void emit(std::string stderr_text, nlohmann::ordered_json rec) {
  if (t_deferred) {
    t_deferred->items.push_back({std::move(stderr_text), std::move(rec)});
    return;
  }
  std::fputs(stderr_text.c_str(), stderr);
  if (!rec.is_null()) recorded().push_back(std::move(rec));
}

nlohmann::ordered_json null_or(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
}

std::string dump(const nlohmann::ordered_json& j) {
  // Hostile input (comments, names) may hold invalid UTF-8: replaced, never an abort.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

DeferredReports::DeferredReports() { t_deferred = this; }
DeferredReports::~DeferredReports() {
  if (t_deferred == this) t_deferred = nullptr;
}
void DeferredReports::flush() {
  if (t_deferred == this) t_deferred = nullptr;
  replay(std::move(items));
  items.clear();
}
void DeferredReports::replay(std::vector<Item> items) {
  for (auto& it : items) emit(std::move(it.stderr_text), std::move(it.recorded));
}

void print_diagnostics(const DiagSink& sink, const SourceManager& sm) {
  emit(sink.render(sm), nullptr);
  for (const auto& d : sink.all()) {
    const DiagInfo& info = diag_info(d.code);
    nlohmann::ordered_json j;
    j["code"] = std::string(info.code);
    j["name"] = std::string(info.name);
    j["severity"] = is_warning(d.code) ? "warning" : "error";
    j["file"] = d.pos.known() ? nlohmann::ordered_json(sm.name(d.pos.file)) : nlohmann::ordered_json(nullptr);
    j["line"] = d.pos.known() ? nlohmann::ordered_json(d.pos.line) : nlohmann::ordered_json(nullptr);
    j["column"] = d.pos.known() ? nlohmann::ordered_json(d.pos.col) : nlohmann::ordered_json(nullptr);
    j["object"] = null_or(d.object);
    j["path"] = null_or(d.path);
    j["message"] = d.message;
    j["notes"] = d.notes;
    emit("", std::move(j));
  }
}

// One recorded entry; every key always present, in the schema's order.
nlohmann::ordered_json entry(nlohmann::ordered_json code, nlohmann::ordered_json name, const std::string& message) {
  nlohmann::ordered_json j;
  j["code"] = std::move(code);
  j["name"] = std::move(name);
  j["severity"] = "error";
  j["file"] = nullptr;
  j["line"] = nullptr;
  j["column"] = nullptr;
  j["object"] = nullptr;
  j["path"] = nullptr;
  j["message"] = message;
  j["notes"] = nlohmann::ordered_json::array();
  return j;
}

void print_input_error(const InputError& e) {
  const DiagInfo& info = diag_info(e.code);
  emit(render(e) + "\n", entry(std::string(info.code), std::string(info.name), e.message));
}

void print_error(const std::string& line) {
  auto j = entry(nullptr, nullptr, line);
  // "[PATH:LINE: ]error[E0900]: ..." lines made by hand keep their code (and location).
  size_t at = line.find("error[E");
  if (at != std::string::npos && line.size() > at + 11 && line[at + 11] == ']') {
    std::string code = line.substr(at + 6, 5);
    for (const auto& info : diag_catalog())
      if (info.code == code) j["code"] = code, j["name"] = std::string(info.name);
    if (line.compare(at + 12, 2, ": ") == 0) j["message"] = line.substr(at + 14);
    std::string where = at >= 2 && line.compare(at - 2, 2, ": ") == 0 ? line.substr(0, at - 2) : "";
    size_t colon = where.rfind(':');
    if (colon != std::string::npos && colon + 1 < where.size() &&
        where.find_first_not_of("0123456789", colon + 1) == std::string::npos && where.size() - colon < 10) {
      j["file"] = where.substr(0, colon);
      j["line"] = std::stoul(where.substr(colon + 1));
    }
  }
  emit(line + "\n", std::move(j));
}

void print_tool_error(const std::string& rendered, const std::string& file, int line, int column,
                      const std::string& message) {
  auto j = entry(nullptr, nullptr, message);
  if (!file.empty()) j["file"] = file;
  if (line > 0) j["line"] = line;
  if (column > 0) j["column"] = column;
  if (size_t nl = rendered.find('\n'); nl != std::string::npos) j["notes"].push_back(rendered.substr(nl + 1));
  emit(rendered + "\n", std::move(j));
}

nlohmann::ordered_json recorded_diagnostics() {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& d : recorded()) a.push_back(d);
  return a;
}

nlohmann::ordered_json json_document(const std::string& kind) {
  nlohmann::ordered_json j;
  j["schema"] = "kpc.dev/" + kind + "/v1";
  return j;
}

void print_json(nlohmann::ordered_json doc) {
  doc["diagnostics"] = recorded_diagnostics();
  std::fputs(dump(doc).c_str(), stdout);
  std::fflush(stdout);
  printed = true;
}

void print_json_text(const std::string& text) {
  auto parsed = nlohmann::ordered_json::parse(text);
  nlohmann::ordered_json doc;
  if (parsed.contains("schema")) doc["schema"] = parsed["schema"];  // first, whatever order the library kept
  for (auto& [k, v] : parsed.items()) doc[k] = std::move(v);
  print_json(std::move(doc));
}

bool json_printed() { return printed; }

void print_error_document(const std::string& command, int exit_code) {
  auto j = json_document("error");
  j["command"] = command;
  j["exit_code"] = exit_code;
  print_json(std::move(j));
}

}  // namespace kpc::cli
