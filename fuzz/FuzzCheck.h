// The fuzz targets' property check. Under libFuzzer a violated property aborts (the fuzzer saves
// the input); in the replay test (tests/fuzz, compiled with HEDDLE_FUZZ_REPLAY) it prints the
// property and makes the target return 1, so the replay fails that input instead of passing or
// killing the whole test binary.
#pragma once

#include <cstdio>
#include <cstdlib>

#ifdef HEDDLE_FUZZ_REPLAY
#define HEDDLE_FUZZ_CHECK(cond)                                                               \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)
#else
#define HEDDLE_FUZZ_CHECK(cond) \
  do {                          \
    if (!(cond)) std::abort();  \
  } while (0)
#endif
