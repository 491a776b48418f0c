// The nftables proof applies the partial to the held state in place (a copy of the held
// state is ~600,000 rules at 10,000 Services) and keeps a copy of only what the partial can
// change: the chains and sets its commands name (and the table's own attributes). restore()
// puts the held state back exactly as it was -- the same objects, contents and order -- for
// a failed proof (the report's prior) or a failed apply.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "verifier/nft/nft.h"

namespace kpc::applier {

class NftTouched {
 public:
  /// Saves what `scripts` can change in table `name` of `family`. nullopt when a command
  /// reaches beyond named chains and sets of that table (the caller copies the whole state).
  static std::optional<NftTouched> save(const verifier::nft::NftState& st, verifier::nft::Family family,
                                        const std::string& name, const std::vector<std::string_view>& scripts);
  /// Puts the saved objects back (and removes the ones the scripts created).
  void restore(verifier::nft::NftState& st) const;
  size_t objects() const { return chains_.size() + sets_.size(); }
  /// The names of the chains and sets saved (what the scripts can change).
  template <class C, class S>
  void for_each_name(C&& chain, S&& set) const {
    for (const auto& c : chains_) chain(c.first);
    for (const auto& s : sets_) set(s.first);
  }

 private:
  verifier::nft::Family family_ = verifier::nft::Family::Ip;
  std::string name_;
  bool table_existed_ = false;
  std::optional<verifier::nft::Table> table_attrs_;  ///< the table without chains and sets
  // Per touched name: its position before, and a copy (nullopt: it did not exist).
  std::vector<std::pair<std::string, std::optional<std::pair<size_t, verifier::nft::Chain>>>> chains_;
  std::vector<std::pair<std::string, std::optional<std::pair<size_t, verifier::nft::Set>>>> sets_;
};

}  // namespace kpc::applier
