#include "verifier/sem/outcome.h"

namespace kpc::verifier::sem {

const char* origin_name(Origin o) { return o == Origin::Node ? "node" : "arriving"; }

}  // namespace kpc::verifier::sem
