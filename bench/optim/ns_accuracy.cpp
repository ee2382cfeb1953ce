// How close each Newton–Schulz form (ns_dtype x ns_algorithm, muon.h) comes to the fp64 polar
// factor U V^T of its input, and to the fp64 run of the same iteration, with its time. The table
// of docs/optimizers.md ("Newton–Schulz: bf16 products and the Gram iteration", its accuracy table) is this program's output.
//
//   build/bench/optim/canzona_ns_accuracy [--shapes 256x1024,1024x256,512x512] [--repeats 3]
//
// Inputs, per shape (s = min side): "gaussian", i.i.d. N(0, 1) entries; "decaying", Q1 diag(1/k)
// Q2^T with random orthonormal Q1, Q2 (singular values 1, 1/2, ..., 1/s, as a gradient's decay).
// The polar factor and the fp64 iteration run in double (LAPACK dgesvd, BLAS dgemm); the forms
// through newton_schulz with each option set. Errors are relative Frobenius distances; "fp64 NS"
// isolates the products' rounding, "polar" adds what 5 (or 8) iterations leave of the polynomial
// approximation itself (the simple triple keeps singular values in about [0.7, 1.2] by design).
#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "canzona/optim/bf16_products.h"
#include "canzona/optim/blas_env.h"
#include "canzona/optim/muon.h"

namespace {

using namespace canzona::optim;

struct Shape {
  int rows = 0, cols = 0;
};

std::vector<double> gaussian(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

// rows x cols orthonormal columns (rows >= cols), from the QR of a Gaussian matrix; row-major.
std::vector<double> orthonormal(int rows, int cols, std::uint32_t seed) {
  std::vector<double> a = gaussian(static_cast<std::size_t>(rows) * cols, seed);
  std::vector<double> tau(static_cast<std::size_t>(cols));
  LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, rows, cols, a.data(), cols, tau.data());
  LAPACKE_dorgqr(LAPACK_ROW_MAJOR, rows, cols, cols, a.data(), cols, tau.data());
  return a;
}

std::vector<double> decaying(int rows, int cols, std::uint32_t seed) {
  const int s = std::min(rows, cols);
  const std::vector<double> q1 = orthonormal(rows, s, seed), q2 = orthonormal(cols, s, seed + 1);
  std::vector<double> scaled = q1;  // q1 diag(1/k)
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < s; ++k) scaled[static_cast<std::size_t>(r) * s + k] /= (k + 1);
  std::vector<double> u(static_cast<std::size_t>(rows) * cols);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, s, 1.0, scaled.data(), s,
              q2.data(), s, 0.0, u.data(), cols);
  return u;
}

// U V^T of the thin SVD of u (rows x cols), row-major.
std::vector<double> polar(std::vector<double> u, int rows, int cols) {
  const int s = std::min(rows, cols);
  std::vector<double> sv(static_cast<std::size_t>(s)), left(static_cast<std::size_t>(rows) * s),
      right(static_cast<std::size_t>(s) * cols), superb(static_cast<std::size_t>(s));
  LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'S', 'S', rows, cols, u.data(), cols, sv.data(), left.data(), s,
                 right.data(), cols, superb.data());
  std::vector<double> p(static_cast<std::size_t>(rows) * cols);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cols, s, 1.0, left.data(), s,
              right.data(), cols, 0.0, p.data(), cols);
  return p;
}

// The standard iteration in fp64 (wide orientation), the published definition (muon.h).
std::vector<double> ns64(const std::vector<double>& u, int rows, int cols,
                         const NewtonSchulzOptions& o) {
  const bool tall = rows > cols;
  const int s = std::min(rows, cols), l = std::max(rows, cols);
  std::vector<double> x(u.size());
  double norm = 0.0;
  for (double v : u) norm += v * v;
  norm = std::sqrt(norm) + o.eps;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double v = u[static_cast<std::size_t>(r) * cols + c] / norm;
      x[tall ? static_cast<std::size_t>(c) * rows + r : static_cast<std::size_t>(r) * cols + c] = v;
    }
  std::vector<double> a(static_cast<std::size_t>(s) * s), aa(a.size()), y(x.size());
  const auto set = ns_coefficients(o.coefficients);
  for (int i = 0; i < o.steps; ++i) {
    const NsTriple t = set[std::min<std::size_t>(static_cast<std::size_t>(i), set.size() - 1)];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, l, 1.0, x.data(), l, x.data(), l,
                0.0, a.data(), s);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0, a.data(), s, a.data(), s,
                0.0, aa.data(), s);
    for (std::size_t k = 0; k < a.size(); ++k) aa[k] = t.b * a[k] + t.c * aa[k];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, l, s, 1.0, aa.data(), s, x.data(), l,
                0.0, y.data(), l);
    for (std::size_t k = 0; k < x.size(); ++k) x[k] = t.a * x[k] + y[k];
  }
  if (!tall) return x;
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(r) * cols + c] = x[static_cast<std::size_t>(c) * rows + r];
  return out;
}

double rel(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (std::size_t k = 0; k < got.size(); ++k) {
    num += (got[k] - want[k]) * (got[k] - want[k]);
    den += want[k] * want[k];
  }
  return std::sqrt(num / den);
}

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    Shape s;
    if (std::sscanf(item.c_str(), "%dx%d", &s.rows, &s.cols) != 2 || s.rows < 1 || s.cols < 1) {
      std::fprintf(stderr, "canzona_ns_accuracy: error: --shapes: '%s' is not ROWSxCOLS\n",
                   item.c_str());
      std::exit(2);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ensure_blas_core(argc, argv);
  std::string shapes = "256x1024,1024x256,512x512";
  int repeats = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shapes" && i + 1 < argc) {
      shapes = argv[++i];
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: canzona_ns_accuracy [--shapes RxC,...] [--repeats N]\n");
      return 2;
    }
  }
  std::printf("bf16 products: %s; OpenBLAS core %s, %d thread(s)\n", bf16_backend_report().c_str(),
              blas_core_report().c_str(), blas_threads());
  std::printf("%-10s %-9s %-16s %-5s %-8s %-6s %10s %10s %10s\n", "shape", "input", "coefficients",
              "dtype", "algo", "ran", "vs polar", "vs fp64NS", "median ms");
  const struct {
    NsCoefficients set;
    int steps;
  } sets[] = {{NsCoefficients::kSimple, 5},
              {NsCoefficients::kQuintic, 5},
              {NsCoefficients::kPolarExpress, 8}};
  for (const Shape& sh : parse_shapes(shapes)) {
    const std::size_t n = static_cast<std::size_t>(sh.rows) * sh.cols;
    for (const char* input : {"gaussian", "decaying"}) {
      const std::vector<double> u =
          std::strcmp(input, "gaussian") == 0 ? gaussian(n, 5) : decaying(sh.rows, sh.cols, 7);
      const std::vector<double> p = polar(u, sh.rows, sh.cols);
      std::vector<float> uf(n), out(n);
      for (std::size_t k = 0; k < n; ++k) uf[k] = static_cast<float>(u[k]);
      for (const auto& cs : sets) {
        NewtonSchulzOptions o;
        o.coefficients = cs.set;
        o.steps = cs.steps;
        const std::vector<double> ref = ns64(u, sh.rows, sh.cols, o);
        for (NsDtype dtype : {NsDtype::kF32, NsDtype::kBF16})
          for (NsAlgorithm algorithm : {NsAlgorithm::kStandard, NsAlgorithm::kGram}) {
            o.dtype = dtype;
            o.algorithm = algorithm;
            std::vector<double> times;
            for (int r = 0; r < repeats; ++r) {
              const auto t0 = std::chrono::steady_clock::now();
              newton_schulz(matrix_view(uf.data(), sh.rows, sh.cols),
                            matrix_view(out.data(), sh.rows, sh.cols), o);
              times.push_back(
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
            std::sort(times.begin(), times.end());
            const bool gram = uses_gram(sh.rows, sh.cols, o);
            std::printf("%4dx%-5d %-9s %-13s x%d %-5s %-8s %-6s %10.3e %10.3e %10.2f\n", sh.rows,
                        sh.cols, input, to_string(cs.set), cs.steps, to_string(dtype),
                        to_string(algorithm), gram ? "gram" : "std", rel(out, p), rel(out, ref),
                        1e3 * times[times.size() / 2]);
          }
      }
    }
  }
  return 0;
}
