// Just enough of CUDA C++ for a host compiler to build the kernels' sources on the CPU
// (tests/kernels): the qualifiers, the thread indices, float16 and its conversions (IEEE's
// round to nearest, ties to even, as the GPU's and NumPy's) and the bit casts. With THREADS 1 a
// block is one thread, which the host runs block after block.
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

inline float __half2float(__half h) {
    const int exponent = (h.bits >> 10) & 31, mantissa = h.bits & 1023;
    const double sign = (h.bits & 0x8000) ? -1.0 : 1.0;
    if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
    if (exponent == 0) return sign * std::ldexp((double)mantissa, -24);  // subnormal
    return sign * std::ldexp((double)(1024 + mantissa), exponent - 25);
}

inline __half __float2half(float f) {
    __half h;
    const unsigned short sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs((double)f);
    if (std::isnan(f)) { h.bits = 0x7e00; return h; }
    if (a >= 65520.0) { h.bits = sign | 0x7c00; return h; }  // past the largest, 65504
    int e = a > 0 ? std::ilogb(a) : -14;
    if (e < -14) e = -14;  // subnormals share the smallest exponent's quantum
    double r = std::nearbyint(std::ldexp(a, 10 - e));  // ties to even
    if (r == 2048.0) { r = 1024.0; e += 1; }
    h.bits = sign | (r < 1024.0 ? (unsigned short)r
                                : (unsigned short)(((e + 15) << 10) | ((int)r - 1024)));
    return h;
}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
struct float16 {  // CuPy's float16 in its elementwise kernels
    __half h;
    float16() {}
    explicit float16(float f) : h(__float2half(f)) {}
    operator float() const { return __half2float(h); }
};
using std::exp; using std::log; using std::sqrt;
