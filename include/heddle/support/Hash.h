// Hash combining for heddle's value types (boost's mixing constant, 64-bit).
#pragma once

#include <cstddef>
#include <functional>

namespace heddle {

/// Mixes the hash of `v` into `seed`.
template <class T>
void hash_combine(size_t& seed, const T& v) {
  seed ^= std::hash<T>{}(v) + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

}  // namespace heddle
