// oneDNN matmul wrapper (onednn.h).
#include "onednn.h"

#include <cstdlib>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "canzona/common/error.h"
#include "canzona/optim/blas_env.h"

// libgomp's (oneDNN's OpenMP runtime); declared here so no OpenMP compile flags are needed.
extern "C" int omp_get_max_threads();
extern "C" void omp_set_num_threads(int threads);

namespace canzona::optim::detail {
namespace {

// Sets the OpenMP thread count oneDNN's parallel regions use for its lifetime, then restores it.
class OmpThreads {
 public:
  explicit OmpThreads(int threads) : saved_(omp_get_max_threads()) {
    if (threads != saved_) omp_set_num_threads(threads);
  }
  ~OmpThreads() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

dnnl::memory::data_type to_dnnl(MatmulType type) {
  return type == MatmulType::kBF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

const char* type_name(MatmulType type) {
  return type == MatmulType::kBF16 ? "bf16" : "fp32";
}

// oneDNN leaves out of its default ISA set the ISAs it lists as "initial support" (AMX was one in
// 2.x releases), so AMX is allowed explicitly, once, before the first primitive; the effective ISA
// stays the CPU's own where it has no AMX. A user's ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA stands.
void allow_amx() {
  static const bool done = [] {
    if (std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr && std::getenv("DNNL_MAX_CPU_ISA") == nullptr)
      (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core_amx);  // refused once JIT code ran: kept
    return true;
  }();
  (void)done;
}

// Whether the effective ISA has bf16 instructions (AVX512-BF16, or AMX which includes it): oneDNN
// also makes bf16 matmuls by emulation on plain AVX-512, which are not used (the widened path is
// the one for CPUs without bf16 instructions).
bool isa_has_bf16() {
  allow_amx();
  const int isa = static_cast<int>(dnnl_get_effective_cpu_isa());
  const int bf16 = static_cast<int>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & bf16) == bf16;
}

using Key = std::tuple<MatmulType, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       std::int64_t, bool, std::int64_t, int>;

dnnl::matmul::primitive_desc make_desc(const dnnl::engine& engine, MatmulType type, std::int64_t m,
                                       std::int64_t k, std::int64_t lda, std::int64_t n,
                                       std::int64_t ldb, bool b_transposed, std::int64_t ldc) {
  using dims = dnnl::memory::dims;
  const dnnl::memory::desc a_md(dims{m, k}, to_dnnl(type), dims{lda, 1});
  const dnnl::memory::desc b_md(dims{k, n}, to_dnnl(type),
                                b_transposed ? dims{1, ldb} : dims{ldb, 1});
  const dnnl::memory::desc c_md(dims{m, n}, dnnl::memory::data_type::f32, dims{ldc, 1});
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::matmul::primitive_desc(engine, a_md, b_md, c_md);
#else
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine);
#endif
}

struct Primitive {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul matmul;
};

// This thread's engine, stream and primitives.
struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, Primitive> primitives;
};

Context& context() {
  allow_amx();
  thread_local Context c;
  return c;
}

// Primitives kept per thread; past this many (a process seeing that many shapes) the cache is
// emptied and refilled, which changes no bits (a primitive is a function of its shape).
constexpr std::size_t kMaxPrimitives = 1024;

}  // namespace

bool onednn_matmul_available(MatmulType type) {
  static const bool f32 = [] {
    try {
      const OmpThreads threads(1);
      make_desc(context().engine, MatmulType::kF32, 32, 32, 32, 32, 32, false, 32);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  static const bool bf16 = [] {
    if (!isa_has_bf16()) return false;
    try {
      const OmpThreads threads(1);
      make_desc(context().engine, MatmulType::kBF16, 32, 32, 32, 32, 32, false, 32);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return type == MatmulType::kBF16 ? bf16 : f32;
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return str(v->major, ".", v->minor, ".", v->patch);
}

std::string onednn_isa() {
  allow_amx();
  switch (static_cast<int>(dnnl_get_effective_cpu_isa())) {
    case 0x1:
      return "sse41";
    case 0x3:
      return "avx";
    case 0x7:
      return "avx2";
    case 0x27:
      return "avx512_core";
    case 0x67:
      return "avx512_core_vnni";
    case 0xe7:
      return "avx512_core_bf16";
    case 0x3e7:
      return "avx512_core_amx";
    case 0x407:
      return "avx2_vnni";
    default:
      return str("isa 0x", std::hex, static_cast<int>(dnnl_get_effective_cpu_isa()));
  }
}

void onednn_matmul(MatmulType type, const void* a, std::int64_t m, std::int64_t k, std::int64_t lda,
                   const void* b, std::int64_t n, std::int64_t ldb, bool b_transposed, float* c,
                   std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  CANZONA_CHECK(k > 0, "onednn_matmul: k must be > 0");
  const int threads = blas_threads();
  const OmpThreads scoped(threads);
  Context& ctx = context();
  const Key key{type, m, k, lda, n, ldb, b_transposed, ldc, threads};
  try {
    auto it = ctx.primitives.find(key);
    if (it == ctx.primitives.end()) {
      if (ctx.primitives.size() >= kMaxPrimitives) ctx.primitives.clear();
      dnnl::matmul::primitive_desc pd =
          make_desc(ctx.engine, type, m, k, lda, n, ldb, b_transposed, ldc);
      dnnl::matmul prim(pd);
      it = ctx.primitives.emplace(key, Primitive{std::move(pd), std::move(prim)}).first;
    }
    const dnnl::matmul::primitive_desc& pd = it->second.desc;
    dnnl::memory am(pd.src_desc(), ctx.engine, const_cast<void*>(a));
    dnnl::memory bm(pd.weights_desc(), ctx.engine, const_cast<void*>(b));
    dnnl::memory cm(pd.dst_desc(), ctx.engine, c);
    it->second.matmul.execute(ctx.stream,
                              {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    ctx.stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(str("oneDNN ", onednn_version(), " matmul (", type_name(type), ") ", m, " x ", k,
                    " * ", k, " x ", n, " failed: ", e.what()));
  }
}

}  // namespace canzona::optim::detail
