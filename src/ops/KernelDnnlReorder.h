// Private to the oneDNN kernels (KernelDnnl.cpp, KernelDnnlMatmul.cpp): the engine and streams
// they share, and copies between a tile's strided view and the
// blocked layouts oneDNN's convolutions want, by own tiled loops over the threads of the calling
// OpenMP team. oneDNN 2.6's reorders for convolution weights (`Acdb48a`, `ABcd16b16a`, ...) ran
// at a third to a half of memory bandwidth; ResNet-50's training step reorders its 94 MB of
// weights three times a step (KernelDnnlReorder.cpp).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace heddle::kdetail {

/// The CPU engine every oneDNN primitive of the kernels runs on (one per process).
dnnl::engine& dnnl_engine();
/// The calling thread's stream on dnnl_engine() (each thread runs its own primitives).
dnnl::stream& dnnl_stream();

/// Copies (or with `add`, adds) the f32 tensor `src`, laid out as `from`, into `dst`, laid out as
/// `to` (same dims): what a oneDNN reorder from `from` to `to` (with a sum post-op for `add`)
/// computes, bit for bit, on omp_get_max_threads() threads. Handles 4-d layouts in which every
/// dim has at most one inner block (plain strided views, `acdb`, `aBcd16b`, `Acdb48a`,
/// `ABcd16b16a`, `BAcd16a16b`, ...); returns false without writing for any other pair, and when
/// `to` has padding (blocks past the dims) that the caller has not zeroed (`to_padding_zeroed`
/// false; the copy writes only the elements inside the dims): the caller then runs oneDNN's
/// reorder.
bool own_reorder(const dnnl::memory::desc& from, const float* src, const dnnl::memory::desc& to,
                 float* dst, bool add, bool to_padding_zeroed);

}  // namespace heddle::kdetail
