// Just enough of CUDA C++ for a host compiler to build the kernels' sources on the CPU
// (tests/kernels): the qualifiers, the thread indices, float16's conversions and the bit
// casts. With THREADS 1 a block is one thread, which the host runs block after block.
#include <cmath>
#include <cstddef>
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
struct dim3 { unsigned x, y, z; };
static dim3 threadIdx, blockIdx, blockDim;
inline void __syncthreads() {}
struct __half { unsigned short bits; };
float __half2float(__half);
__half __float2half(float);
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
struct float16 { unsigned short bits; float16() {} explicit float16(float); operator float() const; };
using std::exp; using std::log; using std::sqrt;
