// Loss curves as a standalone SVG (plot.h). Plain SVG 1.1: no scripts, no fonts beyond the generic
// sans-serif family, numbers written locale-independently (std::to_chars).
//
// Terms: the *plot area* is the framed rectangle [left, right] x [top, bottom] in pixels (inside
// fixed margins for the title, tick labels and axis labels); the *data range* is [x_lo, x_hi] x
// [y_lo, y_hi]. x spans the data exactly; y spans min..max over all curves and the reference line,
// widened by 5% of that span on each side. A data point (x, y) maps linearly to
//   px = left + (x - x_lo) / (x_hi - x_lo) * (right - left)
//   py = bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top)
// Ticks are multiples of a "nice" step (1, 2 or 5 times a power of ten) chosen near span / 5.
#include "canzona/train/plot.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <string>
#include <system_error>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::train {

namespace {

constexpr double kMarginLeft = 70, kMarginRight = 20, kMarginTop = 40, kMarginBottom = 50;
constexpr int kMinWidth = 200, kMinHeight = 150;
constexpr double kYPad = 0.05;  // fraction of the y span added above and below
constexpr int kTargetTicks = 5, kMaxTicks = 20;

// Tableau 10; curves past the tenth get colours spread by the golden angle in hue.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr std::size_t kPaletteSize = sizeof kPalette / sizeof kPalette[0];

// `v` with `decimals` digits after the point, independent of the C locale.
std::string fixed(double v, int decimals) {
  char buffer[64];
  auto result =
      std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::fixed, decimals);
  if (result.ec != std::errc{}) result = std::to_chars(buffer, buffer + sizeof buffer, v);
  std::string s(buffer, result.ptr);
  if (s.find_first_not_of("-0.") == std::string::npos)  // no "-0.00"
    return decimals > 0 ? "0." + std::string(decimals, '0') : "0";
  return s;
}

std::string px(double v) {
  return fixed(v, 2);
}

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters other than tab, newline and CR are not allowed in XML 1.0.
        out +=
            (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') ? ' ' : c;
    }
  }
  return out;
}

// Code points in a UTF-8 string (for estimating text width).
std::size_t display_length(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string curve_color(std::size_t index) {
  if (index < kPaletteSize) return kPalette[index];
  const double hue = std::fmod(static_cast<double>(index) * 137.508, 360.0) / 60.0;
  const double s = 0.65, v = 0.75, c = v * s;
  const double x = c * (1.0 - std::fabs(std::fmod(hue, 2.0) - 1.0)), m = v - c;
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(hue)) {
    case 0:
      r = c, g = x;
      break;
    case 1:
      r = x, g = c;
      break;
    case 2:
      g = c, b = x;
      break;
    case 3:
      g = x, b = c;
      break;
    case 4:
      r = x, b = c;
      break;
    default:
      r = c, b = x;
      break;
  }
  const char* digits = "0123456789abcdef";
  std::string hex = "#";
  for (double channel : {r, g, b}) {
    const int byte = std::clamp(static_cast<int>(std::lround((channel + m) * 255.0)), 0, 255);
    hex += digits[byte / 16];
    hex += digits[byte % 16];
  }
  return hex;
}

// The nice step (1, 2 or 5 times a power of ten) closest, in ratio, to span / kTargetTicks.
double tick_step(double span) {
  const double raw = span / kTargetTicks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double best = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (std::fabs(std::log(m * power / raw)) < std::fabs(std::log(best / raw))) best = m * power;
  }
  return best;
}

struct Axis {
  double lo, hi, step;
  int decimals;  // digits after the point in tick labels
  std::vector<double> ticks;
};

Axis make_axis(double lo, double hi) {
  Axis axis{lo, hi, tick_step(hi - lo), 0, {}};
  axis.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(axis.step) + 1e-9)));
  const double first = std::ceil(lo / axis.step - 1e-9), last = std::floor(hi / axis.step + 1e-9);
  for (int i = 0; i <= kMaxTicks && first + i <= last; ++i)
    axis.ticks.push_back((first + i) * axis.step);
  return axis;
}

// Widens a degenerate range [v, v] so that the mapping stays defined.
void widen_if_flat(double& lo, double& hi) {
  if (hi > lo) return;
  const double half = std::max(std::fabs(lo) * 0.05, 0.5);
  lo -= half;
  hi += half;
}

void validate(const std::vector<Curve>& curves, const PlotOptions& options) {
  CANZONA_REQUIRE(!curves.empty(), "loss plot: no curves to draw");
  for (std::size_t i = 0; i < curves.size(); ++i) {
    const Curve& c = curves[i];
    const std::string name = str("loss plot: curve ", i, " ('", c.label, "')");
    CANZONA_REQUIRE(!c.x.empty() && !c.y.empty(), name, " is empty");
    CANZONA_REQUIRE(c.x.size() == c.y.size(), name, " has ", c.x.size(), " x values but ",
                    c.y.size(), " y values");
    for (std::size_t j = 0; j < c.x.size(); ++j) {
      CANZONA_REQUIRE(std::isfinite(c.x[j]) && std::isfinite(c.y[j]), name, " has a non-finite ",
                      "point at index ", j, " (", c.x[j], ", ", c.y[j], ")");
    }
  }
  CANZONA_REQUIRE(std::isfinite(options.reference_y), "loss plot: reference_y must be finite (got ",
                  options.reference_y, ")");
  CANZONA_REQUIRE(options.width >= kMinWidth && options.height >= kMinHeight,
                  "loss plot: size must be at least ", kMinWidth, "x", kMinHeight, " (got ",
                  options.width, "x", options.height, ")");
}

}  // namespace

std::string loss_plot_svg(const std::vector<Curve>& curves, const PlotOptions& options) {
  validate(curves, options);
  const bool has_reference = options.reference_y >= 0.0;

  double x_lo = curves[0].x[0], x_hi = x_lo, y_min = curves[0].y[0], y_max = y_min;
  for (const Curve& c : curves) {
    const auto [xa, xb] = std::minmax_element(c.x.begin(), c.x.end());
    const auto [ya, yb] = std::minmax_element(c.y.begin(), c.y.end());
    x_lo = std::min(x_lo, *xa);
    x_hi = std::max(x_hi, *xb);
    y_min = std::min(y_min, *ya);
    y_max = std::max(y_max, *yb);
  }
  if (has_reference) {
    y_min = std::min(y_min, options.reference_y);
    y_max = std::max(y_max, options.reference_y);
  }
  widen_if_flat(x_lo, x_hi);
  widen_if_flat(y_min, y_max);
  CANZONA_REQUIRE(std::isfinite(x_hi - x_lo) && std::isfinite((y_max - y_min) * (1 + 2 * kYPad)),
                  "loss plot: the data range is too large to draw (x ", x_lo, "..", x_hi, ", y ",
                  y_min, "..", y_max, ")");
  const double y_pad = kYPad * (y_max - y_min);
  const Axis x_axis = make_axis(x_lo, x_hi);
  const Axis y_axis = make_axis(y_min - y_pad, y_max + y_pad);

  const double width = options.width, height = options.height;
  const double left = kMarginLeft, right = width - kMarginRight;
  const double top = kMarginTop, bottom = height - kMarginBottom;
  auto px_of = [&](double x) {
    return left + (x - x_axis.lo) / (x_axis.hi - x_axis.lo) * (right - left);
  };
  auto py_of = [&](double y) {
    return bottom - (y - y_axis.lo) / (y_axis.hi - y_axis.lo) * (bottom - top);
  };

  std::string svg;
  svg.reserve(4096);
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         std::to_string(options.width) + "\" height=\"" + std::to_string(options.height) +
         "\" viewBox=\"0 0 " + std::to_string(options.width) + " " +
         std::to_string(options.height) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!options.title.empty()) {
    svg += "<text class=\"title\" x=\"" + px(width / 2) +
           "\" y=\"24\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">" +
           escape(options.title) + "</text>\n";
  }

  for (double t : x_axis.ticks) {
    const std::string x = px(px_of(t));
    svg += "<line x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + px(top) + "\" y2=\"" + px(bottom) +
           "\" stroke=\"#e5e5e5\"/>\n";
    svg += "<text class=\"tick-x\" x=\"" + x + "\" y=\"" + px(bottom + 16) +
           "\" text-anchor=\"middle\">" + fixed(t, x_axis.decimals) + "</text>\n";
  }
  for (double t : y_axis.ticks) {
    const std::string y = px(py_of(t));
    svg += "<line x1=\"" + px(left) + "\" x2=\"" + px(right) + "\" y1=\"" + y + "\" y2=\"" + y +
           "\" stroke=\"#e5e5e5\"/>\n";
    svg += "<text class=\"tick-y\" x=\"" + px(left - 6) + "\" y=\"" + px(py_of(t) + 4) +
           "\" text-anchor=\"end\">" + fixed(t, y_axis.decimals) + "</text>\n";
  }
  svg += "<rect class=\"plot-area\" x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" +
         px(right - left) + "\" height=\"" + px(bottom - top) +
         "\" fill=\"none\" stroke=\"#333\"/>\n";
  svg += "<text class=\"x-label\" x=\"" + px((left + right) / 2) + "\" y=\"" + px(height - 10) +
         "\" text-anchor=\"middle\">" + escape(options.x_label) + "</text>\n";
  const std::string y_label_x = px(16), y_label_y = px((top + bottom) / 2);
  svg += "<text class=\"y-label\" x=\"" + y_label_x + "\" y=\"" + y_label_y +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 " + y_label_x + " " + y_label_y +
         ")\">" + escape(options.y_label) + "</text>\n";

  if (has_reference) {
    const std::string y = px(py_of(options.reference_y));
    svg += "<line class=\"reference\" x1=\"" + px(left) + "\" x2=\"" + px(right) + "\" y1=\"" + y +
           "\" y2=\"" + y + "\" stroke=\"#555\" stroke-dasharray=\"2,3\"/>\n";
    if (!options.reference_label.empty()) {
      svg += "<text class=\"reference-label\" x=\"" + px(left + 6) + "\" y=\"" +
             px(py_of(options.reference_y) - 4) + "\" fill=\"#555\">" +
             escape(options.reference_label) + "</text>\n";
    }
  }

  for (std::size_t i = 0; i < curves.size(); ++i) {
    const Curve& c = curves[i];
    svg += "<polyline class=\"curve\" fill=\"none\" stroke=\"" + curve_color(i) +
           "\" stroke-width=\"1.5\" stroke-linejoin=\"round\"";
    if (c.dashed) svg += " stroke-dasharray=\"6,4\"";
    svg += " points=\"";
    for (std::size_t j = 0; j < c.x.size(); ++j) {
      if (j > 0) svg += ' ';
      svg += px(px_of(c.x[j]));
      svg += ',';
      svg += px(py_of(c.y[j]));
    }
    svg += "\"/>\n";
  }

  std::size_t longest = 0;
  for (const Curve& c : curves) longest = std::max(longest, display_length(c.label));
  const double row_h = 16, swatch_w = 24;
  const double legend_w = 20 + swatch_w + 6.5 * static_cast<double>(longest);
  const double legend_h = 8 + row_h * static_cast<double>(curves.size());
  const double legend_x = std::max(left + 4, right - legend_w - 8), legend_y = top + 8;
  svg += "<g class=\"legend\">\n";
  svg += "<rect x=\"" + px(legend_x) + "\" y=\"" + px(legend_y) + "\" width=\"" + px(legend_w) +
         "\" height=\"" + px(legend_h) +
         "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n";
  for (std::size_t i = 0; i < curves.size(); ++i) {
    const double y = legend_y + 4 + row_h * (static_cast<double>(i) + 0.5);
    svg += "<line x1=\"" + px(legend_x + 8) + "\" x2=\"" + px(legend_x + 8 + swatch_w) +
           "\" y1=\"" + px(y) + "\" y2=\"" + px(y) + "\" stroke=\"" + curve_color(i) +
           "\" stroke-width=\"2\"";
    if (curves[i].dashed) svg += " stroke-dasharray=\"6,4\"";
    svg += "/>\n";
    svg += "<text x=\"" + px(legend_x + 14 + swatch_w) + "\" y=\"" + px(y + 4) + "\">" +
           escape(curves[i].label) + "</text>\n";
  }
  svg += "</g>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace canzona::train
