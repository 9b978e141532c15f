// Hopper warpgroup matrix instructions (wgmma.mma_async, sm_90a) for the GPU MLA decode family:
// shared-memory matrix descriptors, the fence / commit / wait protocol and the bf16 shapes the
// variants use. For GPU sources only; everything is compiled only where MLATUNE_ARCH_NVIDIA_SM90A
// holds (device code built for exactly sm_90a), so callers guard their uses with the same macro.
//
// Operand layout (PTX's 128-byte swizzle canonical layout): a tile is stored as 128-byte rows
// (64 bf16 of one row along K for a K-major operand, along N for an MN-major one) in atoms of 8
// rows = 1024 bytes, 1024-byte aligned; 16-byte chunk j of row r sits at chunk position
// j ^ (r % 8) of its row, which spreads the rows a tensor-core read touches over all banks (the
// unswizzled layout measured 2.3x the ideal shared-memory wavefronts). A descriptor gives the
// start address and two strides: for K-major operands SBO = the next 8-row atom (LBO unused: one
// instruction's 16-element K step stays inside a row; successive steps advance the start address
// by 32 bytes within the atom); for MN-major ones LBO = the next 64-element block along N and
// SBO = the next 8-row atom along K.
//
// Protocol (PTX ISA, "asynchronous warpgroup level matrix" instructions): all 128 threads of a
// warpgroup (4 consecutive warps, the first at a warp index divisible by 4) issue the same wgmma
// sequence; fence() before the first wgmma that touches accumulators written by other
// instructions; commit() closes a group, wait<N>() blocks until at most N groups are pending.
// Shared memory written by ordinary stores or cp.async and read by wgmma needs
// fence_proxy_async() in every writing thread before the barrier that publishes it. The compiler
// does not know that a wgmma's accumulators change only at wait(): fence_operands() pins them
// (no register access moves across it) before fence() and after wait().
#pragma once

#include <cstdint>

#include "gpu/hip_compat.h"

#if MLATUNE_ARCH_NVIDIA_SM90A

namespace mlatune {
namespace {
namespace wg {

// A shared-memory matrix descriptor for the 128-byte swizzle: start address, LBO and SBO in
// 16-byte units (14 bits each), base offset 0 (atoms 1024-byte aligned), layout type 1.
__device__ __forceinline__ uint64_t desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t{(smem_addr & 0x3ffffu) >> 4} | (uint64_t{lbo >> 4} << 16) |
         (uint64_t{sbo >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 x N fp32 accumulators) = (accumulate ? d : 0) + A (64 x 16 bf16) B (16 x N bf16), A and
// B in shared memory as their descriptors say; kTransB = 1: B is MN-major. Fragment of d, as for
// mma.sync m16n8: warp w of the warpgroup holds rows 16 w + g and 16 w + g + 8 (g = lane / 4),
// d[4 j + e] at column 8 j + 2 (lane % 4) + (e & 1), row + 8 for e >= 2.
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n32k16_bf16(float (&d)[16], uint64_t desc_a,
                                                     uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1, 0, %19;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
}

template <int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t desc_a,
                                                      uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
      "%127"
      "}, %128, %129, p, 1, 1, 0, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
}

}  // namespace wg
}  // namespace
}  // namespace mlatune

#endif  // MLATUNE_ARCH_NVIDIA_SM90A
