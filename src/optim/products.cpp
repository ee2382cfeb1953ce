// Newton–Schulz products at a chosen precision (products.h).
#include "products.h"

#include <algorithm>
#include <span>

#include "canzona/common/dtype.h"
#include "canzona/common/error.h"
#include "canzona/optim/bf16_products.h"
#include "canzona/optim/linalg.h"
#include "onednn.h"
#include "scratch.h"

namespace canzona::optim::detail {
namespace {

bool on_onednn(ProductPath path) {
  return path == ProductPath::kOneDnn || path == ProductPath::kOneDnnF32;
}

MatmulType matmul_type(ProductPath path) {
  return path == ProductPath::kOneDnn ? MatmulType::kBF16 : MatmulType::kF32;
}

std::size_t element_bytes(ProductPath path) {
  return path == ProductPath::kOneDnn ? sizeof(bf16) : sizeof(float);
}

// Address of element (r, c) of an operand.
const void* at(const Operand& x, std::int64_t r, std::int64_t c, ProductPath path) {
  return static_cast<const char*>(x.data) +
         static_cast<std::size_t>(r * x.ld + c) * element_bytes(path);
}

// The fp32 view of an operand on OpenBLAS.
ConstMatrixView f32(const Operand& x) {
  return ConstMatrixView(static_cast<const float*>(x.data), x.rows, x.cols, x.ld);
}

void check_square(const char* what, std::int64_t n, MatrixView c) {
  CANZONA_CHECK(c.rows == n && c.cols == n, what, ": result ", shape_string(c.rows, c.cols),
                " for a ", n, " x ", n, " product");
}

// onednn_matmul with every operand dense: its fast kernels are made for plain dense layouts, so
// a result that is a block of a wider matrix (ldc > n) goes through a dense scratch block.
void onednn_dense(ProductPath path, const void* a, std::int64_t m, std::int64_t k, std::int64_t lda,
                  const void* b, std::int64_t n, std::int64_t ldb, bool b_transposed, float* c,
                  std::int64_t ldc) {
  if (ldc == n) {
    onednn_matmul(matmul_type(path), a, m, k, lda, b, n, ldb, b_transposed, c, ldc);
    return;
  }
  Scratch scratch;
  float* block = scratch.floats(static_cast<std::size_t>(m * n));
  onednn_matmul(matmul_type(path), a, m, k, lda, b, n, ldb, b_transposed, block, n);
  for (std::int64_t r = 0; r < m; ++r) std::copy_n(block + r * n, n, c + r * ldc);
}

// C[r0:r1, r0:n] = A[r0:r1, :] B[:, r0:n] for each row panel [r0, r1) of height kPanelRows. B is
// symmetric in every use (a polynomial in one symmetric matrix), so on oneDNN its columns r0..n
// are read as its contiguous rows r0..n, transposed: a dense operand, no copy.
void panels_upper(ProductPath path, const Operand& a, const Operand& b, MatrixView c) {
  const std::int64_t n = c.rows;
  for (std::int64_t r0 = 0; r0 < n; r0 += kPanelRows) {
    const std::int64_t r1 = std::min(n, r0 + kPanelRows);
    float* out = c.data + r0 * c.ld + r0;
    if (on_onednn(path)) {
      onednn_dense(path, at(a, r0, 0, path), r1 - r0, a.cols, a.ld, at(b, r0, 0, path), n - r0,
                   b.ld, true, out, c.ld);
    } else {
      const ConstMatrixView af = f32(a), bf = f32(b);
      gemm(Trans::kNo, Trans::kNo, 1.0f, ConstMatrixView(af.row(r0), r1 - r0, af.cols, af.ld),
           ConstMatrixView(bf.row(0) + r0, bf.rows, n - r0, bf.ld), 0.0f,
           MatrixView{out, r1 - r0, n - r0, c.ld});
    }
  }
}

}  // namespace

ProductPath product_path(NsDtype dtype) {
  if (dtype == NsDtype::kF32) return ProductPath::kF32;
  return onednn_matmul_available(MatmulType::kBF16) ? ProductPath::kOneDnn : ProductPath::kWidened;
}

const char* to_string(ProductPath path) {
  switch (path) {
    case ProductPath::kF32:
      return "fp32";
    case ProductPath::kWidened:
      return "bf16-widened";
    case ProductPath::kOneDnn:
      return "bf16-onednn";
    case ProductPath::kOneDnnF32:
      return "fp32-onednn";
  }
  return "?";
}

std::size_t operand_bytes(ProductPath path, std::int64_t rows, std::int64_t cols) {
  const auto n = static_cast<std::size_t>(rows * cols);
  switch (path) {
    case ProductPath::kWidened:
      return n * sizeof(float);
    case ProductPath::kOneDnn:
      return n * sizeof(bf16);
    case ProductPath::kF32:
    case ProductPath::kOneDnnF32:
      break;
  }
  return 0;
}

Operand make_operand(ProductPath path, ConstMatrixView src, void* storage) {
  if (path == ProductPath::kF32 || path == ProductPath::kOneDnnF32)
    return {src.data, src.rows, src.cols, src.ld};
  const std::int64_t rows = src.rows, cols = src.cols;
  if (path == ProductPath::kOneDnn) {
    auto* dst = static_cast<bf16*>(storage);
    for (std::int64_t r = 0; r < rows; ++r)
      cast(std::span<const float>(src.row(r), static_cast<std::size_t>(cols)),
           std::span<bf16>(dst + r * cols, static_cast<std::size_t>(cols)));
  } else {
    auto* dst = static_cast<float*>(storage);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* s = src.row(r);
      float* d = dst + r * cols;
      for (std::int64_t j = 0; j < cols; ++j) d[j] = round_to_bf16(s[j]);
    }
  }
  return {storage, rows, cols, std::max<std::int64_t>(cols, 1)};
}

void round_in_place(ProductPath path, MatrixView m) {
  if (path != ProductPath::kWidened && path != ProductPath::kOneDnn) return;
  for (std::int64_t r = 0; r < m.rows; ++r) {
    float* row = m.row(r);
    for (std::int64_t j = 0; j < m.cols; ++j) row[j] = round_to_bf16(row[j]);
  }
}

std::size_t rounded_operand_bytes(ProductPath path, std::int64_t rows, std::int64_t cols) {
  return path == ProductPath::kOneDnn ? operand_bytes(path, rows, cols) : 0;
}

Operand rounded_operand(ProductPath path, ConstMatrixView m, void* storage) {
  if (path == ProductPath::kOneDnn) return make_operand(path, m, storage);
  return {m.data, m.rows, m.cols, m.ld};
}

void gram_upper(ProductPath path, const Operand& x, MatrixView c) {
  check_square("gram_upper", x.rows, c);
  if (!on_onednn(path)) {
    syrk_upper(Trans::kNo, 1.0f, f32(x), 0.0f, c);
    return;
  }
  const std::int64_t n = x.rows;
  for (std::int64_t r0 = 0; r0 < n; r0 += kPanelRows) {
    const std::int64_t r1 = std::min(n, r0 + kPanelRows);
    onednn_dense(path, at(x, r0, 0, path), r1 - r0, x.cols, x.ld, at(x, r0, 0, path), n - r0, x.ld,
                 true, c.data + r0 * c.ld + r0, c.ld);
  }
}

void square_upper(ProductPath path, const Operand& a, MatrixView c) {
  CANZONA_CHECK(a.rows == a.cols, "square_upper: ", shape_string(a.rows, a.cols), " is not square");
  check_square("square_upper", a.rows, c);
  if (!on_onednn(path)) {
    syrk_upper(Trans::kNo, 1.0f, f32(a), 0.0f, c);  // A A^T = A A for a symmetric A
    return;
  }
  panels_upper(path, a, a, c);
}

void product_upper(ProductPath path, const Operand& a, const Operand& b, MatrixView c) {
  CANZONA_CHECK(a.rows == a.cols && b.rows == b.cols && a.cols == b.rows,
                "product_upper: ", shape_string(a.rows, a.cols), " * ",
                shape_string(b.rows, b.cols), " is not a product of square matrices");
  check_square("product_upper", a.rows, c);
  panels_upper(path, a, b, c);
}

void product(ProductPath path, const Operand& a, const Operand& b, MatrixView c) {
  CANZONA_CHECK(a.cols == b.rows && c.rows == a.rows && c.cols == b.cols,
                "product: ", shape_string(a.rows, a.cols), " * ", shape_string(b.rows, b.cols),
                " -> ", shape_string(c.rows, c.cols));
  if (on_onednn(path)) {
    onednn_matmul(matmul_type(path), a.data, a.rows, a.cols, a.ld, b.data, b.cols, b.ld, false,
                  c.data, c.ld);
    return;
  }
  gemm(Trans::kNo, Trans::kNo, 1.0f, f32(a), f32(b), 0.0f, c);
}

}  // namespace canzona::optim::detail

namespace canzona::optim {

Bf16Backend bf16_backend() {
  return detail::onednn_matmul_available(detail::MatmulType::kBF16) ? Bf16Backend::kOneDnn
                                                                    : Bf16Backend::kWidened;
}

const char* to_string(Bf16Backend backend) {
  return backend == Bf16Backend::kOneDnn ? "onednn" : "widened";
}

std::string bf16_backend_report() {
  if (bf16_backend() == Bf16Backend::kOneDnn)
    return str("oneDNN ", detail::onednn_version(), " bf16 matmul (", detail::onednn_isa(), ")");
  return str("widened: bf16-rounded operands on OpenBLAS sgemm (oneDNN ", detail::onednn_version(),
             " has no bf16 matmul for this CPU's ", detail::onednn_isa(), ")");
}

}  // namespace canzona::optim
