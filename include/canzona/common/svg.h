// Building blocks of the project's pictures (the plan, loss and simulator SVGs): XML escaping,
// locale-independent numbers, "nice" axis ticks, units for value axes and a text-width estimate
// for layout. Plain SVG 1.1 text, no scripts or fonts beyond the generic sans-serif family.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace canzona::svg {

// `s` with &, <, >, " and ' escaped; control characters other than tab, newline and CR (not
// allowed in XML 1.0) become spaces.
std::string escape(std::string_view s);

// `v` with `decimals` digits after the point, independent of the C locale; never "-0.00".
std::string fixed(double v, int decimals);

// `v` rounded to `digits` significant digits, without trailing zeros, and without an exponent for
// 1e-4 <= |v| < 1e6 ("1.85", "16.2", "0.0312", "20"); "0" for 0.
std::string sig(double v, int digits = 3);

// The nice step (1, 2 or 5 times a power of ten) closest, in ratio, to span / target.
double nice_step(double span, int target);

// An axis over [lo, hi]: its step, the digits after the point its labels need, and the multiples
// of the step inside the range (at most 21).
struct Axis {
  double lo = 0, hi = 1, step = 1;
  int decimals = 0;
  std::vector<double> ticks;
};
Axis make_axis(double lo, double hi, int target_ticks = 5);

// A unit a value axis is written in: the values are divided by `scale`.
struct Unit {
  std::string_view name;
  double scale = 1;
};
// The largest of `units` (ordered from the smallest scale up) at which `max` is at least 1; the
// smallest unit when none is.
Unit pick_unit(double max, std::span<const Unit> units);
// FLOP, kFLOP ... PFLOP (powers of 1000) and B, KiB ... TiB (powers of 1024).
Unit flop_unit(double max);
Unit byte_unit(double max);

// A generous estimate of the rendered width of `s` in sans-serif at `font_size` px: 0.62 em per
// code point, 0.7 em in bold (DejaVu Sans, the usual rendering font, averages 0.55 em and 0.63 em
// bold; capitals reach 0.7 and 0.8).
double text_width(std::string_view s, double font_size, bool bold = false);

// An SVG document of width x height px on a white background with 11 px sans-serif text.
class Document {
 public:
  Document(double width, double height);
  // A text element at (x, y) (the baseline) with `attributes` (e.g. `text-anchor="end"`);
  // `content` is escaped.
  void text(double x, double y, std::string_view content, std::string_view attributes = {});
  void line(double x1, double y1, double x2, double y2, std::string_view attributes);
  // A rectangle; `tooltip`, when given, becomes its <title>.
  void rect(double x, double y, double w, double h, std::string_view attributes,
            std::string_view tooltip = {});
  void raw(std::string_view markup) { body_ += markup; }
  std::string finish() const;

 private:
  double width_, height_;
  std::string body_;
};

// A pixel coordinate as written in the documents (two decimals).
inline std::string px(double v) {
  return fixed(v, 2);
}

}  // namespace canzona::svg
