// huge_alloc and HugeFree (heddle/support/HugePages.h): aligned operator new[] plus madvise.
#include "heddle/support/HugePages.h"

#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace heddle {

void HugeFree::operator()(void* p) const noexcept {
  ::operator delete[](p, std::align_val_t(kHugePageBytes));
}

void* huge_alloc(std::size_t bytes) {
  void* p = ::operator new[](bytes, std::align_val_t(kHugePageBytes));
#if defined(__linux__)
  if (bytes >= kHugePageBytes) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace heddle
