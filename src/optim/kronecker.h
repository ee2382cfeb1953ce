// Two-sided Kronecker factors, shared by Shampoo and SOAP (internal).
//
// Terms. A rows x cols parameter with gradient G keeps a left statistic L (rows x rows) and a
// right statistic R (cols x cols): decayed sums of G G^T and G^T G of which only the upper
// triangle is valid. A side is *kept* when its size is <= max_precond_dim; a side above it is the
// identity and keeps no buffers. Each kept side also has a *companion* of the statistic's shape
// that the optimizer derives from it (Shampoo: L^(-1/4), R^(-1/4); SOAP: the eigenbases Q_L, Q_R).
// The optimizer owns the buffers (they are members in its public header); these functions check
// the shared options, size the buffers, view them and update the statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "canzona/optim/matrix.h"

namespace canzona::optim::detail {

// True when 0 <= b < 1, the range of a decay rate.
bool is_decay(double b);

// Throws UsageError "<who>: ..." unless precondition_frequency >= 1 and lr and weight_decay are
// finite.
void check_frequency_and_lr(const std::string& who, int precondition_frequency, double lr,
                            double weight_decay);

// A side of size n: when n <= max_precond_dim, sizes `statistic` and `companion` to n x n zeros
// and returns true (kept); otherwise leaves both untouched (empty) and returns false (identity).
bool allocate_side(std::int64_t n, std::int64_t max_precond_dim, std::vector<float>& statistic,
                   std::vector<float>& companion);

// The n x n matrix held in a side's buffer when `kept`, or a 0 x 0 view for an identity side.
// `buffer` must hold n * n floats when `kept`.
MatrixView side_view(std::vector<float>& buffer, bool kept, std::int64_t n);

// For G (rows x cols): L <- decay L + gain G G^T and R <- decay R + gain G^T G (ssyrk, upper
// triangles). `l` is rows x rows and `r` cols x cols; a 0 x 0 view (an identity side) is skipped.
void accumulate_statistics(ConstMatrixView grad, float gain, float decay, MatrixView l,
                           MatrixView r);

}  // namespace canzona::optim::detail
