// Private helpers shared by the op builders: index spaces and projections from plain vectors.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/Graph.h"

namespace heddle::ops_detail {

/// Dims `names[i]=extents[i]`, with reduce(monoid) where `reduce[i]` (empty: all parallel).
IndexSpace make_space(const std::vector<std::string>& names, const std::vector<int64_t>& extents,
                      const std::vector<std::optional<Monoid>>& reduce = {});

/// A projection with rows of coefficients over `in` index dims, offsets and window (empty: 0s
/// and 1s).
IndexProjection make_proj(int64_t in, const std::vector<std::vector<int64_t>>& rows,
                          std::vector<int64_t> offset = {}, std::vector<int64_t> window = {});

/// Row `i` selects index dim `dims[i]` (-1: the zero row).
IndexProjection select_proj(int64_t in, const std::vector<int64_t>& dims,
                            std::vector<int64_t> window = {});

/// Point p reads p + offset (n dims).
IndexProjection shifted_identity(int64_t n, std::vector<int64_t> offset);

/// The identity projection on `n` dims.
IndexProjection identity_proj(int64_t n);

/// `d0, d1, ...` (n names).
std::vector<std::string> dim_names(int64_t n, const std::string& stem = "d");

/// `[2, 3]`.
std::string shape_str(const IVec& s);

/// Normalizes a possibly negative axis; -1 when out of range.
int64_t norm_axis(int64_t axis, int64_t rank);

}  // namespace heddle::ops_detail
