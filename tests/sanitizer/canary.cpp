// Sanitizer canaries (asan preset only): proof that the sanitizers the suite relies on
// are really active where the tests run. "leak" loses a heap block, which LeakSanitizer
// must report at exit (it needs ptrace-like access to the process; in a container
// without it LSan stops with a fatal error instead, and the test fails, so CI cannot
// silently run without leak checking). "ubsan" overflows a signed int, which UBSan
// (-fno-sanitize-recover) must report.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
volatile int sink;
}

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "leak") == 0) {
    void* p = std::malloc(4242);
    std::memset(p, 1, 4242);
    sink = static_cast<char*>(p)[7];
    p = nullptr;  // the only pointer is gone
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "ubsan") == 0) {
    volatile int big = 2147483647;
    sink = big + argc;  // signed overflow
    return 0;
  }
  std::fprintf(stderr, "usage: kpc_sanitizer_canary leak|ubsan\n");
  return 2;
}
