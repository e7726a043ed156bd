// Hash combining for heddle's value types (boost's mixing constant, 64-bit), and FNV-1a 64 over
// bytes (digests of results and checksums of files that must be equal across runs and hosts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace heddle {

/// Mixes the hash of `v` into `seed`.
template <class T>
void hash_combine(size_t& seed, const T& v) {
  seed ^= std::hash<T>{}(v) + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

/// FNV-1a 64 of `n` bytes at `data`, continuing from `h` (the default is the offset basis).
/// Stable across builds and hosts, unlike std::hash.
inline uint64_t fnv1a_64(const void* data, size_t n, uint64_t h = 1469598103934665603ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

}  // namespace heddle
