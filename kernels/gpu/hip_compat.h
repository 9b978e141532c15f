// The one header that GPU code includes, device and host alike: it makes HIP source build with
// both toolchains the project supports.
//
// - AMD (hipcc, or clang -x hip; __HIP__ / __HIP_PLATFORM_AMD__): the real HIP runtime,
//   <hip/hip_runtime.h>.
// - NVIDIA (nvcc; __CUDACC__): <cuda_runtime.h> plus the HIP runtime names this project uses,
//   mapped onto CUDA below as types, constants and inline functions with HIP's signatures. Debian's
//   HIP 5.2 NVIDIA headers do not compile against CUDA 13, hence our own mapping.
//
// Contract for users:
// - Include it only from sources compiled as GPU code (.hip files, compiled by nvcc or a HIP
//   compiler); anything else is refused with #error. Plain C++ (.cc) files stay GPU-free.
// - Call only the hip* names listed in the NVIDIA section; a name missing there compiles on AMD
//   and breaks the NVIDIA build (add it here, with HIP's signature).
// - Launch kernels with triple chevrons, kernel<<<grid, block, shmem, stream>>>(args...): nvcc
//   and every HIP compiler accept them. hipLaunchKernelGGL exists for code that prefers it.
// - bf16 and fp8 data travel as raw bits (uint16_t / uint8_t) in this project, so neither
//   <cuda_bf16.h> nor <cuda_fp8.h> (nor their HIP counterparts) is included here; matrix-core code
//   that needs vendor types includes them under its own arch guard.
// - The MLATUNE_ARCH_* feature macros and MLATUNE_WAVE_SIZE describe the target of the device
//   compilation pass. Host passes (which also parse kernel bodies) see every feature macro as 0.
#pragma once

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
#define MLATUNE_GPU_AMD 1
#define MLATUNE_GPU_NVIDIA 0
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#define MLATUNE_GPU_AMD 0
#define MLATUNE_GPU_NVIDIA 1
#include <cuda_runtime.h>
#else
#error "kernels/gpu/hip_compat.h is for GPU sources: compile them with nvcc or a HIP compiler"
#endif

#include <cstddef>

// ---- Function qualifiers -------------------------------------------------------------------
// Functions defined in headers also need `inline` (or a template) to avoid duplicate host symbols.
#define MLATUNE_DEVICE __device__
#define MLATUNE_HOST_DEVICE __host__ __device__

// True in the pass that generates device code (nvcc: __CUDA_ARCH__, HIP: __HIP_DEVICE_COMPILE__).
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define MLATUNE_DEVICE_PASS 1
#else
#define MLATUNE_DEVICE_PASS 0
#endif

// ---- Wave (warp) size ----------------------------------------------------------------------
// A compile-time constant taken from the target architecture, never the runtime warpSize: kernels
// size shared arrays and unroll reductions with it. 32 on NVIDIA and on RDNA (gfx10-12, whose HIP
// default is wave32); 64 on gfx9 / CDNA (gfx90a, gfx942, gfx950). An AMD target not listed is an
// error rather than a guess. In an AMD host pass no target is known: the value is 64, the wave
// size of every AMD target this project builds (gfx942, gfx950), and exists only so that kernel
// bodies parse; host code must not derive launch geometry from it.
#if MLATUNE_GPU_NVIDIA
#define MLATUNE_WAVE_SIZE 32
#elif !MLATUNE_DEVICE_PASS
#define MLATUNE_WAVE_SIZE 64
#elif defined(__gfx942__) || defined(__gfx950__) || defined(__gfx90a__) || defined(__GFX9__)
#define MLATUNE_WAVE_SIZE 64
#elif defined(__GFX10__) || defined(__GFX11__) || defined(__GFX12__)
#define MLATUNE_WAVE_SIZE 32
#else
#error "hip_compat.h: unknown AMD target; add its wave size to MLATUNE_WAVE_SIZE"
#endif

// ---- Matrix-core feature macros (0 or 1, usable in #if) --------------------------------------
// Guard matrix-core code with these and keep a portable (or trapping) #else branch: the other
// targets and the host passes compile that branch.
//   MLATUNE_ARCH_NVIDIA_MMA_BF16  mma.sync with bf16 operands (sm_80+).
//   MLATUNE_ARCH_NVIDIA_MMA_FP8   mma.sync with e4m3 operands (sm_89+).
//   MLATUNE_ARCH_NVIDIA_SM90      Hopper or newer: both of the above.
//   MLATUNE_ARCH_NVIDIA_SM90A     sm_90a arch-specific features (wgmma, setmaxnreg); only in code
//                                 built for exactly "90a" (CMAKE_CUDA_ARCHITECTURES).
//   MLATUNE_ARCH_AMD_MFMA         MFMA with bf16 and fp8 operands (gfx942: e4m3fnuz, gfx950: OCP
//                                 e4m3fn; tell them apart with __gfx942__ / __gfx950__).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MLATUNE_ARCH_NVIDIA_MMA_BF16 1
#else
#define MLATUNE_ARCH_NVIDIA_MMA_BF16 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define MLATUNE_ARCH_NVIDIA_MMA_FP8 1
#else
#define MLATUNE_ARCH_NVIDIA_MMA_FP8 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MLATUNE_ARCH_NVIDIA_SM90 1
#else
#define MLATUNE_ARCH_NVIDIA_SM90 0
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLATUNE_ARCH_NVIDIA_SM90A 1
#else
#define MLATUNE_ARCH_NVIDIA_SM90A 0
#endif
#if defined(__HIP_DEVICE_COMPILE__) && (defined(__gfx942__) || defined(__gfx950__))
#define MLATUNE_ARCH_AMD_MFMA 1
#else
#define MLATUNE_ARCH_AMD_MFMA 0
#endif

// ---- HIP runtime names on CUDA -------------------------------------------------------------
#if MLATUNE_GPU_NVIDIA

using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipDeviceProp_t = cudaDeviceProp;
using hipMemcpyKind = cudaMemcpyKind;
using hipFuncAttribute = cudaFuncAttribute;
using hipDeviceAttribute_t = cudaDeviceAttr;
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipStreamCaptureMode = cudaStreamCaptureMode;

inline constexpr hipError_t hipSuccess = cudaSuccess;
inline constexpr hipMemcpyKind hipMemcpyHostToHost = cudaMemcpyHostToHost;
inline constexpr hipMemcpyKind hipMemcpyHostToDevice = cudaMemcpyHostToDevice;
inline constexpr hipMemcpyKind hipMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
inline constexpr hipMemcpyKind hipMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;
inline constexpr hipMemcpyKind hipMemcpyDefault = cudaMemcpyDefault;
inline constexpr hipFuncAttribute hipFuncAttributeMaxDynamicSharedMemorySize =
    cudaFuncAttributeMaxDynamicSharedMemorySize;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeComputeCapabilityMajor =
    cudaDevAttrComputeCapabilityMajor;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeComputeCapabilityMinor =
    cudaDevAttrComputeCapabilityMinor;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeMultiprocessorCount =
    cudaDevAttrMultiProcessorCount;
inline constexpr hipStreamCaptureMode hipStreamCaptureModeGlobal = cudaStreamCaptureModeGlobal;

// Errors.
inline const char* hipGetErrorString(hipError_t e) { return cudaGetErrorString(e); }
inline hipError_t hipGetLastError() { return cudaGetLastError(); }
inline hipError_t hipPeekAtLastError() { return cudaPeekAtLastError(); }

// Memory.
inline hipError_t hipMalloc(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
template <class T>
inline hipError_t hipMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
inline hipError_t hipFree(void* p) { return cudaFree(p); }
inline hipError_t hipMemcpy(void* dst, const void* src, size_t bytes, hipMemcpyKind kind) {
  return cudaMemcpy(dst, src, bytes, kind);
}
inline hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind kind,
                                 hipStream_t stream = nullptr) {
  return cudaMemcpyAsync(dst, src, bytes, kind, stream);
}
inline hipError_t hipMemset(void* dst, int value, size_t bytes) {
  return cudaMemset(dst, value, bytes);
}
inline hipError_t hipMemsetAsync(void* dst, int value, size_t bytes, hipStream_t stream = nullptr) {
  return cudaMemsetAsync(dst, value, bytes, stream);
}

// Synchronisation and events.
inline hipError_t hipDeviceSynchronize() { return cudaDeviceSynchronize(); }
inline hipError_t hipStreamSynchronize(hipStream_t stream) { return cudaStreamSynchronize(stream); }
inline hipError_t hipEventCreate(hipEvent_t* e) { return cudaEventCreate(e); }
inline hipError_t hipEventDestroy(hipEvent_t e) { return cudaEventDestroy(e); }
inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t stream = nullptr) {
  return cudaEventRecord(e, stream);
}
inline hipError_t hipEventSynchronize(hipEvent_t e) { return cudaEventSynchronize(e); }

// Streams and graphs (what the tests use to check that launches are stream-ordered and
// capturable).
inline hipError_t hipStreamCreate(hipStream_t* stream) { return cudaStreamCreate(stream); }
inline hipError_t hipStreamDestroy(hipStream_t stream) { return cudaStreamDestroy(stream); }
inline hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode) {
  return cudaStreamBeginCapture(stream, mode);
}
inline hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t* graph) {
  return cudaStreamEndCapture(stream, graph);
}
inline hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t* exec, hipGraph_t graph,
                                               unsigned long long flags) {
  return cudaGraphInstantiateWithFlags(exec, graph, flags);
}
inline hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream) {
  return cudaGraphLaunch(exec, stream);
}
inline hipError_t hipGraphExecDestroy(hipGraphExec_t exec) { return cudaGraphExecDestroy(exec); }
inline hipError_t hipGraphDestroy(hipGraph_t graph) { return cudaGraphDestroy(graph); }
inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
  return cudaEventElapsedTime(ms, start, stop);
}

// Devices and versions.
inline hipError_t hipGetDevice(int* device) { return cudaGetDevice(device); }
inline hipError_t hipSetDevice(int device) { return cudaSetDevice(device); }
inline hipError_t hipGetDeviceCount(int* count) { return cudaGetDeviceCount(count); }
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device) {
  return cudaGetDeviceProperties(prop, device);
}
inline hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device) {
  return cudaDeviceGetAttribute(value, attr, device);
}
inline hipError_t hipDriverGetVersion(int* version) { return cudaDriverGetVersion(version); }
inline hipError_t hipRuntimeGetVersion(int* version) { return cudaRuntimeGetVersion(version); }

// Kernel attributes. Only HIP's form, the kernel as `const void*`
// (reinterpret_cast<const void*>(&kernel)): CUDA's template overload taking the kernel itself
// does not exist in HIP, so offering it here would let code compile on NVIDIA only.
inline hipError_t hipFuncSetAttribute(const void* kernel, hipFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(kernel, attr, value);
}

// HIP's launch macro. Like HIP's own, a template kernel whose arguments contain a comma must be
// wrapped in parentheses: hipLaunchKernelGGL((k<A, B>), ...).
#define hipLaunchKernelGGL(kernel, grid, block, shared_bytes, stream, ...) \
  (kernel)<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__)

#endif  // MLATUNE_GPU_NVIDIA

// A kernel parameter read in place (indexed, its address taken) rather than copied to each
// thread: CUDA's __grid_constant__ (sm_70+); AMD kernel arguments are read in place already.
#if MLATUNE_GPU_NVIDIA
#define MLATUNE_GRID_CONSTANT __grid_constant__
#else
#define MLATUNE_GRID_CONSTANT
#endif

// ---- Portable device helpers ---------------------------------------------------------------

// Butterfly exchange within a wave: returns `v` of lane (lane ^ lane_mask). Every lane of the
// wave must call it (CUDA: full-warp mask), and lane_mask must be < MLATUNE_WAVE_SIZE.
__device__ __forceinline__ float mlatune_shfl_xor(float v, int lane_mask) {
#if MLATUNE_GPU_NVIDIA
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask);
#endif
}

__device__ __forceinline__ int mlatune_shfl_xor(int v, int lane_mask) {
#if MLATUNE_GPU_NVIDIA
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask);
#endif
}

// True when `pred` holds in every lane of the wave. Every lane must call it.
__device__ __forceinline__ bool mlatune_all(bool pred) {
#if MLATUNE_GPU_NVIDIA
  return __all_sync(0xffffffffu, pred) != 0;
#else
  return __all(pred) != 0;
#endif
}
