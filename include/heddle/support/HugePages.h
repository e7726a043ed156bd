// HugeBuffer: memory on huge-page boundaries, advised to be backed by huge pages, for the large
// buffers kernels stream through (an executor's arena, a packed product's panels).
#pragma once

#include <cstddef>
#include <memory>

namespace heddle {

/// The size of a transparent huge page (x86-64 Linux), and the alignment of huge_buffer's blocks.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// Frees a block huge_buffer allocated.
struct HugeFree {
  void operator()(void* p) const noexcept;
};

/// An array of T from huge_buffer.
template <class T>
using HugeBuffer = std::unique_ptr<T[], HugeFree>;

/// `bytes` bytes (uninitialised) starting on a huge-page boundary. A block spanning at least one
/// huge page is advised MADV_HUGEPAGE on Linux, so a host whose transparent_hugepage setting is
/// `madvise` backs it with 2 MiB pages (4 KiB pages spread a few MiB of tiles over thousands of
/// TLB entries). The advice is only advice: where it fails, the block is ordinary memory.
void* huge_alloc(std::size_t bytes);

/// huge_alloc for n elements of T (uninitialised; T trivially constructible).
template <class T>
HugeBuffer<T> huge_buffer(std::size_t n) {
  return HugeBuffer<T>(static_cast<T*>(huge_alloc(n * sizeof(T))));
}

}  // namespace heddle
