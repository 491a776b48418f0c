#include "verifier/nft_sym/compare.h"
