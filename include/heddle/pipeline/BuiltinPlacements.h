// The built-in placements (Tessel's shapes): vshape (1F1B), interleaved:V, vshape-zb (backward
// split into B and W), xshape (two opposite pipelines, as Chimera), mshape, kshape and nnshape.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "heddle/pipeline/Placement.h"

namespace heddle::pipeline {

/// The names `builtin_placement` accepts (`interleaved:V` is listed as "interleaved:V").
std::vector<std::string> builtin_placement_names();

/// True when `spec` names a built-in placement (possibly with a bad parameter).
bool is_builtin_placement(std::string_view spec);

/// The built-in placement `spec` on `devices` devices; a Diagnostic for an unknown name, a bad
/// `interleaved:V` parameter or a device count the shape cannot use (kshape needs an even count
/// >= 2, xshape/nnshape >= 2). Precondition: none.
Result<BlockPlacement> builtin_placement(std::string_view spec, int devices);

/// V-shape: forward `f` (span f_span, memory +1) on devices 0..p-1, then backward `b` (span
/// b_span, memory -1) on p-1..0, as one chain. Precondition: p >= 1, spans > 0.
BlockPlacement make_vshape(int p, double f_span = 1, double b_span = 2);

/// Interleaved: the forward chain visits devices 0..p-1 `v` times (chunk c of device d holds
/// layers c*p+d), the backward chain returns. Precondition: p >= 1, v >= 1, spans > 0.
BlockPlacement make_interleaved(int p, int v, double f_span = 1, double b_span = 2);

/// Zero-bubble V-shape: forward F (+1), input-gradient B ("backward", memory 0, chained back to
/// device 0) and weight-gradient W ("weight-grad", -1, after the B of the same device).
/// Precondition: p >= 1, spans > 0.
BlockPlacement make_vshape_zb(int p, double f_span = 1, double b_span = 1, double w_span = 1);

/// X-shape: two independent V chains per micro-batch, one down (0..p-1) and one up (p-1..0).
/// Precondition: p >= 1.
BlockPlacement make_xshape(int p, double f_span = 1, double b_span = 2);

/// M-shape: a block on all devices (span 1, memory 0) before the forward chain and its backward
/// on all devices after the backward chain. Precondition: p >= 1.
BlockPlacement make_mshape(int p, double f_span = 1, double b_span = 2);

/// K-shape: two V branches on devices [0, p/2) and [p/2, p) joined by a shared block on all
/// devices (forward +1, then its backward -1). Precondition: p >= 2 and even.
BlockPlacement make_kshape(int p, double f_span = 1, double b_span = 2);

/// NN-shape: blocks on all devices before the forward chain and in its middle, mirrored in the
/// backward chain. Precondition: p >= 2.
BlockPlacement make_nnshape(int p, double f_span = 1, double b_span = 2);

}  // namespace heddle::pipeline
