// Reading a node's IPVS state for `kpc compile --backend ipvs --prior-state DIR` (ipvs_state.h).
#include <filesystem>
#include <system_error>

#include "tools/kpc/commands.h"
#include "tools/kpc/ipvs_state.h"

namespace kpc::cli {

bool read_ipvs_prior_state(const std::string& dir, IPFamily family, uint64_t max_input_size, ipvs::PriorState* out,
                           std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *error = "error[E0001]: " + dir + ": --prior-state with the ipvs back end names a directory (ipvs.save, "
             "and optionally ipvs.stats, ipset.save, iptables.save)";
    return false;
  }
  auto load = [&](const char* name, InputText* text, bool required, bool* present) {
    std::string path = dir + "/" + name;
    *present = fs::exists(path, ec);
    if (!*present && !required) return true;
    InputError err;
    if (!text->load(path, max_input_size, &err)) {
      *error = render(err);
      return false;
    }
    return true;
  };
  InputText save, stats, sets;
  bool have_save = false, have_stats = false, have_sets = false;
  if (!load("ipvs.save", &save, true, &have_save) || !load("ipvs.stats", &stats, false, &have_stats) ||
      !load("ipset.save", &sets, false, &have_sets))
    return false;
  auto prefix = [&](std::string* e) {
    if (e->rfind("error[", 0) != 0) *e = dir + "/" + *e;
  };
  if (!ipvs_prior_from_text(save.view(), stats.view(), have_stats, out, error)) {
    prefix(error);
    return false;
  }
  (void)family;  // both families are read; the sync leaves the other family's servers alone
  out->sets.reset();
  if (have_sets) {
    out->sets.emplace();
    if (!ipset_prior_from_text(sets.view(), &*out->sets, error)) {
      prefix(error);
      return false;
    }
  }
  return true;
}

}  // namespace kpc::cli
