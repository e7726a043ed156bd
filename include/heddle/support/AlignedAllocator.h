// AlignedAllocator: a standard allocator whose blocks start on a 64-byte boundary (a cache line,
// and the widest vector store), for containers whose elements kernels stream through.
#pragma once

#include <cstddef>
#include <new>

namespace heddle {

/// Allocates arrays of T at 64-byte aligned addresses (std::vector<T, AlignedAllocator<T>>).
/// Stateless: every instance frees what any other allocated.
template <class T>
struct AlignedAllocator {
  using value_type = T;
  /// The alignment of every block, in bytes.
  static constexpr std::size_t kAlignment = 64;

  AlignedAllocator() = default;
  template <class U>
  explicit AlignedAllocator(const AlignedAllocator<U>&) noexcept {}

  /// Storage for n elements (uninitialised).
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlignment)));
  }
  /// Frees a block allocate() returned.
  void deallocate(T* p, std::size_t) noexcept {
    ::operator delete(p, std::align_val_t(kAlignment));
  }

  template <class U>
  bool operator==(const AlignedAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace heddle
