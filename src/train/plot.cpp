// Loss curves as a standalone SVG (plot.h). Plain SVG 1.1: no scripts, no fonts beyond the generic
// sans-serif family, numbers written locale-independently (canzona/common/svg.h).
//
// Terms: the *plot area* is the framed rectangle [left, right] x [top, bottom] in pixels (inside
// fixed margins for the title, tick labels, axis labels and the caption); the *data range* is
// [x_lo, x_hi] x [y_lo, y_hi]. x spans every step; y spans min..max over the points from the
// *first validation step* on and the reference line, widened by 5% of that span on each side. A
// data point (x, y) maps linearly to
//   px = left + (x - x_lo) / (x_hi - x_lo) * (right - left)
//   py = bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top)
// and the curves are clipped to the plot area. Ticks are multiples of a "nice" step (1, 2 or 5
// times a power of ten) chosen near span / 5.
#include "canzona/train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "canzona/common/error.h"
#include "canzona/common/svg.h"

namespace canzona::train {

namespace {

using svg::escape;
using svg::fixed;
using svg::px;

constexpr double kMarginLeft = 70, kMarginRight = 20, kMarginTop = 40;
constexpr double kMarginBottom = 50;  // the tick labels and the x-axis label; caption lines below
constexpr int kMinWidth = 200, kMinHeight = 150;
constexpr double kYPad = 0.05;  // fraction of the y span added above and below

// Tableau 10; runs past the tenth get colours spread by the golden angle in hue.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr std::size_t kPaletteSize = sizeof kPalette / sizeof kPalette[0];

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

// Widens a degenerate range [v, v] so that the mapping stays defined.
void widen_if_flat(double& lo, double& hi) {
  if (hi > lo) return;
  const double half = std::max(std::fabs(lo) * 0.05, 0.5);
  lo -= half;
  hi += half;
}

bool same_doubles(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool bitwise_equal(const RunCurves& a, const RunCurves& b) {
  return same_doubles(a.val.x, b.val.x) && same_doubles(a.val.y, b.val.y) &&
         same_doubles(a.train.x, b.train.x) && same_doubles(a.train.y, b.train.y);
}

// "P (a)" and "P (b)" -> "P (a, b)"; other labels joined with ", ".
std::string joined_label(const std::vector<const RunCurves*>& members) {
  std::string prefix;
  bool shared = true;
  std::vector<std::string> inner;
  for (const RunCurves* r : members) {
    const std::string& l = r->label;
    const std::size_t open = l.find(" (");
    if (open == std::string::npos || l.back() != ')') {
      shared = false;
      break;
    }
    const std::string p = l.substr(0, open);
    if (inner.empty()) prefix = p;
    if (p != prefix) {
      shared = false;
      break;
    }
    inner.push_back(l.substr(open + 2, l.size() - open - 3));
  }
  std::string out;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (i > 0) out += ", ";
    out += shared ? inner[i] : members[i]->label;
  }
  return shared ? prefix + " (" + out + ")" : out;
}

// Runs drawn once each: a run equal to an earlier one joins its entry.
struct Entry {
  std::vector<const RunCurves*> members;
  std::string label;
};

std::vector<Entry> entries_of(const std::vector<RunCurves>& runs) {
  std::vector<Entry> entries;
  for (const RunCurves& r : runs) {
    auto same = std::find_if(entries.begin(), entries.end(),
                             [&](const Entry& e) { return bitwise_equal(*e.members.front(), r); });
    if (same == entries.end())
      entries.push_back({{&r}, ""});
    else
      same->members.push_back(&r);
  }
  for (Entry& e : entries)
    e.label = e.members.size() == 1 ? e.members.front()->label
                                    : joined_label(e.members) + ": bitwise identical";
  return entries;
}

void validate_curve(const Curve& c, const std::string& name) {
  CANZONA_REQUIRE(c.x.size() == c.y.size(), name, " has ", c.x.size(), " x values but ", c.y.size(),
                  " y values");
  for (std::size_t j = 0; j < c.x.size(); ++j) {
    CANZONA_REQUIRE(std::isfinite(c.x[j]) && std::isfinite(c.y[j]), name, " has a non-finite ",
                    "point at index ", j, " (", c.x[j], ", ", c.y[j], ")");
  }
}

void validate(const std::vector<RunCurves>& runs, const PlotOptions& options) {
  CANZONA_REQUIRE(!runs.empty(), "loss plot: no curves to draw");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunCurves& r = runs[i];
    const std::string name = str("loss plot: run ", i, " ('", r.label, "')");
    CANZONA_REQUIRE(
        !r.val.x.empty() || !r.train.x.empty() || !r.val.y.empty() || !r.train.y.empty(), name,
        " is empty");
    validate_curve(r.val, name + "'s validation curve");
    validate_curve(r.train, name + "'s training curve");
  }
  CANZONA_REQUIRE(std::isfinite(options.reference_y), "loss plot: reference_y must be finite (got ",
                  options.reference_y, ")");
  CANZONA_REQUIRE(options.width >= kMinWidth && options.height >= kMinHeight,
                  "loss plot: size must be at least ", kMinWidth, "x", kMinHeight, " (got ",
                  options.width, "x", options.height, ")");
}

}  // namespace

std::string loss_plot_svg(const std::vector<RunCurves>& runs, const PlotOptions& options) {
  validate(runs, options);
  const bool has_reference = options.reference_y >= 0.0;
  const std::vector<Entry> entries = entries_of(runs);

  // x over every point; the first validation step.
  double x_lo = INFINITY, x_hi = -INFINITY, first_val = INFINITY;
  for (const RunCurves& r : runs) {
    for (const Curve* c : {&r.val, &r.train})
      for (double x : c->x) x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
    for (double x : r.val.x) first_val = std::min(first_val, x);
  }
  // Only a validation point before the last step leaves curves to read after it.
  const bool from_validation = std::isfinite(first_val) && first_val > x_lo && first_val < x_hi;
  const double y_from = from_validation ? first_val : x_lo;
  double y_min = INFINITY, y_max = -INFINITY;
  bool clipped = false;
  for (const RunCurves& r : runs)
    for (const Curve* c : {&r.val, &r.train})
      for (std::size_t j = 0; j < c->x.size(); ++j) {
        if (c->x[j] < y_from) continue;
        y_min = std::min(y_min, c->y[j]);
        y_max = std::max(y_max, c->y[j]);
      }
  // Without validation points the reference line stretches the range; with them the range stays
  // on the losses and a reference outside it is named in the caption instead.
  if (has_reference && !from_validation) {
    y_min = std::min(y_min, options.reference_y);
    y_max = std::max(y_max, options.reference_y);
  }
  widen_if_flat(x_lo, x_hi);
  widen_if_flat(y_min, y_max);
  CANZONA_REQUIRE(std::isfinite(x_hi - x_lo) && std::isfinite((y_max - y_min) * (1 + 2 * kYPad)),
                  "loss plot: the data range is too large to draw (x ", x_lo, "..", x_hi, ", y ",
                  y_min, "..", y_max, ")");
  const double y_pad = kYPad * (y_max - y_min);
  const svg::Axis x_axis = svg::make_axis(x_lo, x_hi);
  const svg::Axis y_axis = svg::make_axis(y_min - y_pad, y_max + y_pad);
  for (const RunCurves& r : runs)
    for (const Curve* c : {&r.val, &r.train})
      for (double y : c->y) clipped = clipped || y > y_axis.hi || y < y_axis.lo;

  const bool reference_shown =
      has_reference && options.reference_y >= y_axis.lo && options.reference_y <= y_axis.hi;
  std::vector<std::string> caption{"solid: validation, dashed: training"};
  if (from_validation)
    caption.push_back("y spans the losses from the first validation point (step " +
                      svg::sig(first_val, 6) + ") on" +
                      (clipped ? ", higher early losses run off the top" : ""));
  if (has_reference && !reference_shown && !options.reference_label.empty())
    caption.push_back(options.reference_label + " (" + svg::sig(options.reference_y, 4) +
                      ") lies " + (options.reference_y < y_axis.lo ? "below" : "above") +
                      " the range");
  // Joined by "; " while a line fits the width, else on the next line.
  std::vector<std::string> lines{caption.front()};
  for (std::size_t i = 1; i < caption.size(); ++i) {
    if (svg::text_width(lines.back() + "; " + caption[i], 11) <= options.width - kMarginLeft - 8)
      lines.back() += "; " + caption[i];
    else
      lines.push_back(caption[i]);
  }
  const double width = options.width, height = options.height;
  const double left = kMarginLeft, right = width - kMarginRight;
  // The legend goes between the title and the plot while that leaves the plot kMinPlotH px, else
  // inside the plot's lower left (losses fall: early steps sit high).
  constexpr double kRowH = 16, kMinPlotH = 100;
  const double legend_h = 8 + kRowH * static_cast<double>(entries.size());
  const double below = kMarginBottom + 14 * static_cast<double>(lines.size());
  const bool legend_above = height - below - kMarginTop - legend_h >= kMinPlotH;
  const double top = kMarginTop + (legend_above ? legend_h : 0.0);
  const double bottom = height - below;
  const std::string y_label_x = px(16), y_label_y = px((top + bottom) / 2);
  auto px_of = [&](double x) {
    return left + (x - x_axis.lo) / (x_axis.hi - x_axis.lo) * (right - left);
  };
  auto py_of = [&](double y) {
    return bottom - (y - y_axis.lo) / (y_axis.hi - y_axis.lo) * (bottom - top);
  };

  svg::Document doc(width, height);
  if (!options.title.empty())
    doc.text(width / 2, 24, options.title,
             "class=\"title\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\"");
  for (double t : x_axis.ticks) {
    doc.line(px_of(t), top, px_of(t), bottom, "stroke=\"#e5e5e5\"");
    doc.text(px_of(t), bottom + 16, fixed(t, x_axis.decimals),
             "class=\"tick-x\" text-anchor=\"middle\"");
  }
  for (double t : y_axis.ticks) {
    doc.line(left, py_of(t), right, py_of(t), "stroke=\"#e5e5e5\"");
    doc.text(left - 6, py_of(t) + 4, fixed(t, y_axis.decimals),
             "class=\"tick-y\" text-anchor=\"end\"");
  }
  doc.rect(left, top, right - left, bottom - top,
           "class=\"plot-area\" fill=\"none\" stroke=\"#333\"");
  doc.text((left + right) / 2, bottom + 32, options.x_label,
           "class=\"axis-label x-label\" text-anchor=\"middle\"");
  doc.text(16, (top + bottom) / 2, options.y_label,
           "class=\"axis-label y-label\" text-anchor=\"middle\" transform=\"rotate(-90 " +
               y_label_x + " " + y_label_y + ")\"");
  for (std::size_t i = 0; i < lines.size(); ++i)
    doc.text(left, bottom + 50 + 14 * static_cast<double>(i), lines[i],
             "class=\"caption\" fill=\"#555\"");

  if (reference_shown) {
    doc.line(left, py_of(options.reference_y), right, py_of(options.reference_y),
             "class=\"reference\" stroke=\"#555\" stroke-dasharray=\"2,3\"");
    if (!options.reference_label.empty())
      doc.text(left + 6, py_of(options.reference_y) - 4, options.reference_label,
               "class=\"reference-label\" fill=\"#555\"");
  }

  doc.raw("<clipPath id=\"plot-clip\"><rect x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" +
          px(right - left) + "\" height=\"" + px(bottom - top) +
          "\"/></clipPath>\n<g clip-path=\"url(#plot-clip)\">\n");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const RunCurves& r = *entries[i].members.front();
    for (const Curve* c : {&r.val, &r.train}) {
      if (c->x.empty()) continue;
      // Training thin and light (it is noisy), validation bold on top of it.
      std::string line = "<polyline class=\"curve\" fill=\"none\" stroke=\"" + curve_color(i) +
                         "\" stroke-linejoin=\"round\"";
      line += c == &r.train ? " stroke-width=\"1\" stroke-opacity=\"0.6\" stroke-dasharray=\"6,4\""
                            : " stroke-width=\"2\"";
      line += " points=\"";
      for (std::size_t j = 0; j < c->x.size(); ++j) {
        if (j > 0) line += ' ';
        line += px(px_of(c->x[j])) + ',' + px(py_of(c->y[j]));
      }
      doc.raw(line + "\"/>\n");
      if (c == &r.val)  // a dot per validation point: a one-point curve draws no line
        for (std::size_t j = 0; j < c->x.size(); ++j)
          doc.raw("<circle class=\"val-point\" cx=\"" + px(px_of(c->x[j])) + "\" cy=\"" +
                  px(py_of(c->y[j])) + "\" r=\"2.5\" fill=\"" + curve_color(i) + "\"/>\n");
    }
  }
  doc.raw("</g>\n");

  double longest = 0;
  for (const Entry& e : entries) longest = std::max(longest, svg::text_width(e.label, 11));
  const double swatch_w = 24;
  const double legend_w = std::min(right - left - 8, 22 + swatch_w + longest);
  const double legend_x = left + 4;
  const double legend_y = legend_above ? kMarginTop - 8 : bottom - legend_h - 4;
  doc.raw("<g class=\"legend\">\n");
  doc.rect(legend_x, legend_y, legend_w, legend_h,
           legend_above ? "fill=\"none\" stroke=\"none\""
                        : "fill=\"white\" fill-opacity=\"0.85\" stroke=\"#ccc\"");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const double y = legend_y + 4 + kRowH * (static_cast<double>(i) + 0.5);
    doc.line(legend_x + 8, y, legend_x + 8 + swatch_w, y,
             "stroke=\"" + curve_color(i) + "\" stroke-width=\"2\"");
    doc.text(legend_x + 14 + swatch_w, y + 4, entries[i].label, "class=\"legend-label\"");
  }
  doc.raw("</g>\n");
  return doc.finish();
}

}  // namespace canzona::train
