// Loss-curve SVG (plot.h): well-formed markup, one polyline per curve mapping the data linearly
// into the plot area, one colour per run (validation solid, training dashed), bitwise identical
// runs drawn once, the y-range from the first validation point, nice ticks, escaping, the optional
// reference line and the usage errors.
#include "canzona/train/plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "canzona/common/error.h"

namespace canzona::train {
namespace {

struct Point {
  double x, y;
};

struct Rect {
  double x, y, w, h;
};

// Checks that every start tag has its matching end tag (a tiny XML-ish stack parser). Returns ""
// when well formed, else what went wrong.
std::string tag_balance_error(const std::string& svg) {
  std::vector<std::string> open;
  std::size_t pos = 0;
  while ((pos = svg.find('<', pos)) != std::string::npos) {
    const std::size_t end = svg.find('>', pos);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(pos);
    const std::string tag = svg.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty()) return "closing </" + name + "> with nothing open";
      if (open.back() != name) return "closing </" + name + "> but <" + open.back() + "> is open";
      open.pop_back();
      continue;
    }
    if (tag.back() == '/') continue;  // self-closing
    open.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  return "";
}

// Text between tags must carry no raw '<' or '>' and only the five XML entities.
bool entities_are_valid(const std::string& svg) {
  static const std::regex amp("&(?!(amp|lt|gt|quot|apos);)");
  return !std::regex_search(svg, amp);
}

std::vector<std::string> polylines(const std::string& svg) {
  std::vector<std::string> out;
  static const std::regex re("<polyline[^>]*/>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back(it->str());
  }
  return out;
}

std::vector<Point> points_of(const std::string& polyline) {
  static const std::regex re("points=\"([^\"]*)\"");
  std::smatch m;
  std::vector<Point> out;
  if (!std::regex_search(polyline, m, re)) return out;
  std::istringstream in(m[1].str());
  std::string pair;
  while (in >> pair) {
    const std::size_t comma = pair.find(',');
    out.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
  }
  return out;
}

double attribute(const std::string& element, const std::string& name) {
  const std::regex re("\\s" + name + "=\"([^\"]*)\"");
  std::smatch m;
  if (!std::regex_search(element, m, re)) {
    ADD_FAILURE() << "no " << name << " in " << element;
    return std::numeric_limits<double>::quiet_NaN();
  }
  return std::stod(m[1].str());
}

Rect plot_area(const std::string& svg) {
  static const std::regex re("<rect [^>]*class=\"plot-area\"[^>]*/>");
  std::smatch m;
  if (!std::regex_search(svg, m, re)) {
    ADD_FAILURE() << "no plot-area rect";
    return {0, 0, 1, 1};
  }
  const std::string r = m.str();
  return {attribute(r, "x"), attribute(r, "y"), attribute(r, "width"), attribute(r, "height")};
}

// Tick labels of one axis ("tick-x" or "tick-y"), as numbers.
std::vector<double> tick_values(const std::string& svg, const std::string& cls) {
  const std::regex re("<text [^>]*class=\"" + cls + "\"[^>]*>([^<]*)</text>");
  std::vector<double> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back(std::stod((*it)[1].str()));
  }
  return out;
}

std::size_t count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

Curve ramp(std::size_t n, double x0, double dx, double y0, double dy) {
  Curve c;
  for (std::size_t i = 0; i < n; ++i) {
    c.x.push_back(x0 + dx * static_cast<double>(i));
    c.y.push_back(y0 + dy * static_cast<double>(i));
  }
  return c;
}

RunCurves train_only(std::string label, Curve train) {
  return RunCurves{std::move(label), {}, std::move(train)};
}

// Training 0..100 (losses 10..5), validation at 20..100 (losses 9..8).
RunCurves muon_run() {
  return RunCurves{"muon (lb-asc)", ramp(5, 20, 20, 9.0, -0.25), ramp(11, 0, 10, 10.0, -0.5)};
}

std::string stroke_of(const std::string& element) {
  static const std::regex stroke("stroke=\"([^\"]*)\"");
  std::smatch m;
  if (!std::regex_search(element, m, stroke)) ADD_FAILURE() << "no stroke in " << element;
  return m[1].str();
}

std::vector<std::string> legend_labels(const std::string& svg) {
  static const std::regex re("<text [^>]*class=\"legend-label\"[^>]*>([^<]*)</text>");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1].str());
  return out;
}

TEST(LossPlot, IsWellFormedSvg) {
  PlotOptions o;
  o.title = "convergence";
  const std::string svg = loss_plot_svg({muon_run()}, o);
  ASSERT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 40);
  std::string trimmed = svg;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) {
    trimmed.pop_back();
  }
  ASSERT_GE(trimmed.size(), 6u);
  EXPECT_EQ(trimmed.substr(trimmed.size() - 6), "</svg>");
  EXPECT_EQ(tag_balance_error(svg), "");
  EXPECT_TRUE(entities_are_valid(svg));
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_NE(svg.find("width=\"720\""), std::string::npos);
  EXPECT_NE(svg.find("height=\"420\""), std::string::npos);
  for (const char* text :
       {"convergence", "step", "loss (nats/token)", "muon (lb-asc)", "solid: validation"}) {
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  }
}

TEST(LossPlot, OnePolylinePerCurveWithOnePointPerValue) {
  for (std::size_t runs_n : {1u, 2u, 3u, 12u}) {
    std::vector<RunCurves> runs;
    for (std::size_t i = 0; i < runs_n; ++i)
      runs.push_back(train_only(str("c", i), ramp(1 + 3 * i, 1, 1, 5.0 + i, -0.1)));
    const std::string svg = loss_plot_svg(runs, PlotOptions{});
    const auto lines = polylines(svg);
    ASSERT_EQ(lines.size(), runs_n);
    EXPECT_EQ(count(svg, "<polyline"), runs_n);
    for (std::size_t i = 0; i < runs_n; ++i)
      EXPECT_EQ(points_of(lines[i]).size(), runs[i].train.x.size()) << "run " << i;
  }
}

TEST(LossPlot, OneColourPerRunValidationSolidTrainingDashed) {
  std::vector<RunCurves> runs;
  for (int i = 0; i < 14; ++i)
    runs.push_back(
        RunCurves{str("r", i), ramp(2, 2, 1, 2.0 + i, 0.1), ramp(3, 0, 1, 1.0 + i, 0.1)});
  const std::string svg = loss_plot_svg(runs, PlotOptions{});
  const auto lines = polylines(svg);
  ASSERT_EQ(lines.size(), 2 * runs.size());  // validation, then training, per run
  std::vector<std::string> colours;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string& val = lines[2 * i];
    const std::string& train = lines[2 * i + 1];
    EXPECT_EQ(points_of(val).size(), 2u);
    EXPECT_EQ(points_of(train).size(), 3u);
    EXPECT_EQ(val.find("stroke-dasharray"), std::string::npos) << "run " << i;
    EXPECT_NE(train.find("stroke-dasharray"), std::string::npos) << "run " << i;
    EXPECT_EQ(stroke_of(val), stroke_of(train)) << "run " << i;
    for (const auto& seen : colours) EXPECT_NE(seen, stroke_of(val)) << "run " << i;
    colours.push_back(stroke_of(val));
  }
  EXPECT_EQ(legend_labels(svg).size(), runs.size());
}

TEST(LossPlot, BitwiseIdenticalRunsAreDrawnOnceAndNamedTogether) {
  RunCurves sc = muon_run(), lb = muon_run(), off = muon_run(), other = muon_run();
  sc.label = "muon (sc)";
  off.label = "muon (asc)";
  off.train.y[7] = std::nextafter(off.train.y[7], 0.0);  // one ulp apart: a different run
  other.label = "adamw (sc)";
  other.val.y[2] += 0.5;
  const std::string svg = loss_plot_svg({sc, off, lb, other}, PlotOptions{});
  EXPECT_EQ(polylines(svg).size(), 6u);  // sc = lb-asc, asc, adamw: two curves each
  const auto labels = legend_labels(svg);
  ASSERT_EQ(labels.size(), 3u);
  EXPECT_EQ(labels[0], "muon (sc, lb-asc): bitwise identical");
  EXPECT_EQ(labels[1], "muon (asc)");
  EXPECT_EQ(labels[2], "adamw (sc)");
  // Labels without a shared "<prefix> (...)" are joined whole.
  RunCurves plain = muon_run();
  plain.label = "first";
  RunCurves again = plain;
  again.label = "second";
  EXPECT_EQ(legend_labels(loss_plot_svg({plain, again}, PlotOptions{})),
            std::vector<std::string>{"first, second: bitwise identical"});
}

TEST(LossPlot, PointsMapTheDataLinearlyIntoThePlotArea) {
  const RunCurves run = train_only("muon (sc)", ramp(11, 0, 10, 10.0, -0.5));  // no validation
  const std::string svg = loss_plot_svg({run}, PlotOptions{});
  const Rect area = plot_area(svg);
  ASSERT_GT(area.w, 0);
  ASSERT_GT(area.h, 0);
  EXPECT_GE(area.x, 0);
  EXPECT_GE(area.y, 0);
  EXPECT_LE(area.x + area.w, 720);
  EXPECT_LE(area.y + area.h, 420);

  // x spans the data (0..100) exactly; y spans 5..10 plus 5% of the span (0.25) on each side.
  const double x_lo = 0, x_hi = 100, y_lo = 5 - 0.25, y_hi = 10 + 0.25;
  const auto lines = polylines(svg);
  ASSERT_EQ(lines.size(), 1u);
  const double tol = 0.02;  // coordinates are written with two decimals
  const auto train = points_of(lines[0]);
  ASSERT_EQ(train.size(), run.train.x.size());
  for (std::size_t i = 0; i < train.size(); ++i) {
    EXPECT_NEAR(train[i].x, area.x + (run.train.x[i] - x_lo) / (x_hi - x_lo) * area.w, tol) << i;
    EXPECT_NEAR(train[i].y, area.y + area.h - (run.train.y[i] - y_lo) / (y_hi - y_lo) * area.h, tol)
        << i;
  }
  EXPECT_NEAR(train.front().x, area.x, tol);          // smallest x at the left edge
  EXPECT_NEAR(train.back().x, area.x + area.w, tol);  // largest x at the right edge
  EXPECT_LT(train.front().y, train.back().y);         // the largest loss is drawn highest
  EXPECT_GT(train.front().y, area.y);                 // ... inside the top margin
  EXPECT_LT(train.back().y, area.y + area.h);         // the smallest above the bottom margin
  EXPECT_EQ(svg.find("first validation point"), std::string::npos);
}

TEST(LossPlot, YRangeStartsAtTheFirstValidationPointAndTheCaptionSaysSo) {
  const RunCurves run = muon_run();  // validation from step 20: losses from there span 5..9
  const std::string svg = loss_plot_svg({run}, PlotOptions{});
  const Rect area = plot_area(svg);
  const double x_lo = 0, x_hi = 100, y_lo = 5 - 0.2, y_hi = 9 + 0.2;
  const auto lines = polylines(svg);
  ASSERT_EQ(lines.size(), 2u);
  const double tol = 0.02;
  const Curve* curves[] = {&run.val, &run.train};
  for (int c = 0; c < 2; ++c) {
    const auto pts = points_of(lines[c]);
    ASSERT_EQ(pts.size(), curves[c]->x.size());
    for (std::size_t i = 0; i < pts.size(); ++i) {
      EXPECT_NEAR(pts[i].x, area.x + (curves[c]->x[i] - x_lo) / (x_hi - x_lo) * area.w, tol);
      EXPECT_NEAR(pts[i].y, area.y + area.h - (curves[c]->y[i] - y_lo) / (y_hi - y_lo) * area.h,
                  tol);
    }
  }
  const auto train = points_of(lines[1]);
  EXPECT_LT(train[0].y, area.y);  // step 0 (loss 10) runs off the top, clipped
  EXPECT_GT(train[2].y, area.y);  // step 20 inside
  EXPECT_NE(svg.find("clip-path=\"url(#plot-clip)\""), std::string::npos);
  EXPECT_NE(svg.find("from the first validation point (step 20) on, higher early losses run off "
                     "the top"),
            std::string::npos);
}

TEST(LossPlot, AReferenceBelowTheValidationRangeIsNamedInTheCaptionNotDrawn) {
  PlotOptions o;
  o.reference_y = 3.3125;  // the losses from step 20 on span 5..9
  o.reference_label = "unigram entropy";
  const std::string svg = loss_plot_svg({muon_run()}, o);
  EXPECT_EQ(count(svg, "class=\"reference\""), 0u);
  EXPECT_NE(svg.find("unigram entropy (3.312) lies below the range"), std::string::npos) << svg;
  const auto ticks = tick_values(svg, "tick-y");
  ASSERT_FALSE(ticks.empty());
  EXPECT_GE(ticks.front(), 4.8 - 1e-9);  // the range was not stretched down to 3.3
  o.reference_y = 6.5;                   // inside: drawn, not named
  const std::string inside = loss_plot_svg({muon_run()}, o);
  EXPECT_EQ(count(inside, "class=\"reference\""), 1u);
  EXPECT_EQ(inside.find("lies below"), std::string::npos);
}

TEST(LossPlot, FlatAndSinglePointCurvesStayInsideThePlotArea) {
  for (const RunCurves& run : {train_only("flat", ramp(4, 1, 1, 3.0, 0.0)),
                               train_only("single", ramp(1, 2, 1, 3.0, 0.0))}) {
    const std::string svg = loss_plot_svg({run}, PlotOptions{});
    EXPECT_EQ(tag_balance_error(svg), "");
    EXPECT_EQ(svg.find("nan"), std::string::npos);
    EXPECT_EQ(svg.find("inf"), std::string::npos);
    const Rect area = plot_area(svg);
    const auto lines = polylines(svg);
    ASSERT_EQ(lines.size(), 1u);
    for (const Point& p : points_of(lines[0])) {
      EXPECT_GE(p.x, area.x - 0.01);
      EXPECT_LE(p.x, area.x + area.w + 0.01);
      EXPECT_GT(p.y, area.y);
      EXPECT_LT(p.y, area.y + area.h);
    }
  }
}

TEST(LossPlot, ExtremeButFiniteValuesNeitherHangNorWriteNonNumbers) {
  Curve far;  // x beyond 2^53, where adding 1 to a tick index is lost
  far.x = {1e17, 1e17 + 16, 1e17 + 32};
  far.y = {1e-300, 3e-300, 2e-300};
  Curve huge;
  huge.x = {1, 2};
  huge.y = {1e200, 3e200};
  for (const auto& [name, c] : {std::pair{"far", far}, std::pair{"huge", huge}}) {
    const std::string svg = loss_plot_svg({train_only(name, c)}, PlotOptions{});
    EXPECT_EQ(tag_balance_error(svg), "") << name;
    EXPECT_EQ(svg.find("nan"), std::string::npos) << name;
    EXPECT_EQ(svg.find("inf"), std::string::npos) << name;
    ASSERT_EQ(polylines(svg).size(), 1u);
    EXPECT_EQ(points_of(polylines(svg)[0]).size(), c.x.size()) << name;
  }
  Curve overflowing = huge;  // max - min overflows a double
  overflowing.y = {-1e308, 1e308};
  EXPECT_THROW(loss_plot_svg({train_only("overflowing", overflowing)}, PlotOptions{}), UsageError);
}

TEST(LossPlot, TicksAreFewNiceRoundNumbersInsideTheRange) {
  struct Case {
    double x0, dx, y0, dy;
  };
  const Case cases[] = {{0, 10, 10.0, -0.5},   {1, 1, 3.3, -0.01},   {100, 997, 11.0, -0.9},
                        {0, 0.001, 0.0, 1e-4}, {5, 5, 2.5e3, -10.0}, {0, 25000, 7.7, -0.013}};
  for (const Case& c : cases) {
    const std::string svg =
        loss_plot_svg({train_only("c", ramp(11, c.x0, c.dx, c.y0, c.dy))}, PlotOptions{});
    const double x_lo = c.x0, x_hi = c.x0 + 10 * c.dx;
    const double y_min = std::min(c.y0, c.y0 + 10 * c.dy), y_max = std::max(c.y0, c.y0 + 10 * c.dy);
    const double pad = 0.05 * (y_max - y_min);
    const std::pair<std::string, std::pair<double, double>> axes[] = {
        {"tick-x", {x_lo, x_hi}}, {"tick-y", {y_min - pad, y_max + pad}}};
    for (const auto& [cls, range] : axes) {
      const auto ticks = tick_values(svg, cls);
      SCOPED_TRACE(cls + " for x0=" + std::to_string(c.x0) + " y0=" + std::to_string(c.y0));
      ASSERT_GE(ticks.size(), 3u);
      ASSERT_LE(ticks.size(), 9u);
      const double step = ticks[1] - ticks[0];
      ASSERT_GT(step, 0);
      const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
      const bool nice = std::fabs(mantissa - 1) < 1e-6 || std::fabs(mantissa - 2) < 1e-6 ||
                        std::fabs(mantissa - 5) < 1e-6;
      EXPECT_TRUE(nice) << "step " << step;
      const double span = range.second - range.first;
      for (std::size_t i = 0; i < ticks.size(); ++i) {
        EXPECT_NEAR(ticks[i] / step, std::round(ticks[i] / step), 1e-6) << ticks[i];
        EXPECT_GE(ticks[i], range.first - 1e-9 * span);
        EXPECT_LE(ticks[i], range.second + 1e-9 * span);
        if (i > 0) {
          EXPECT_NEAR(ticks[i] - ticks[i - 1], step, 1e-9 * span + 1e-12);
        }
      }
    }
  }
}

TEST(LossPlot, EscapesAllText) {
  const std::string nasty = "a<b&c>d\"e'f";
  const std::string escaped = "a&lt;b&amp;c&gt;d&quot;e&apos;f";
  PlotOptions o;
  o.title = nasty + "T";
  o.x_label = nasty + "X";
  o.y_label = nasty + "Y";
  o.reference_y = 1.0;
  o.reference_label = nasty + "R";
  const std::string svg = loss_plot_svg({train_only(nasty, ramp(3, 0, 1, 2.0, -0.1))}, o);
  EXPECT_EQ(svg.find(nasty), std::string::npos);
  for (const char* suffix : {"T", "X", "Y", "R"}) {
    EXPECT_NE(svg.find(escaped + suffix), std::string::npos) << suffix;
  }
  EXPECT_NE(svg.find(">" + escaped + "</text>"), std::string::npos);  // the legend entry
  EXPECT_EQ(tag_balance_error(svg), "");
  EXPECT_TRUE(entities_are_valid(svg));
}

TEST(LossPlot, ReferenceLineOnlyWhenReferenceIsNonNegative) {
  const std::vector<RunCurves> runs{train_only("muon (sc)", ramp(11, 0, 10, 10.0, -0.5))};
  PlotOptions without;
  without.reference_label = "unigram entropy";
  const std::string plain = loss_plot_svg(runs, without);
  EXPECT_EQ(plain.find("class=\"reference\""), std::string::npos);
  EXPECT_EQ(plain.find("unigram entropy"), std::string::npos);

  PlotOptions with = without;
  with.reference_y = 2.0;  // below every curve: the y axis must stretch down to it
  const std::string svg = loss_plot_svg(runs, with);
  ASSERT_EQ(count(svg, "class=\"reference\""), 1u);
  EXPECT_NE(svg.find("unigram entropy"), std::string::npos);
  EXPECT_EQ(tag_balance_error(svg), "");

  static const std::regex re("<line [^>]*class=\"reference\"[^>]*/>");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, re));
  const double ref_y = attribute(m.str(), "y1");
  EXPECT_EQ(ref_y, attribute(m.str(), "y2"));
  const Rect area = plot_area(svg);
  // y spans 2..10 plus 5% of 8 on each side.
  const double y_lo = 2 - 0.4, y_hi = 10 + 0.4;
  EXPECT_NEAR(ref_y, area.y + area.h - (2 - y_lo) / (y_hi - y_lo) * area.h, 0.02);
  for (const auto& line : polylines(svg)) {
    for (const Point& p : points_of(line)) EXPECT_LT(p.y, ref_y);  // every loss is above it
  }

  PlotOptions zero = without;
  zero.reference_y = 0.0;
  EXPECT_EQ(count(loss_plot_svg(runs, zero), "class=\"reference\""), 1u);
}

TEST(LossPlot, RejectsBadInputWithUsageError) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const RunCurves good = muon_run();
  RunCurves empty;
  empty.label = "empty";
  RunCurves mismatch = good;
  mismatch.train.y.pop_back();
  RunCurves nan_y = good;
  nan_y.val.y[1] = nan;
  RunCurves inf_y = good;
  inf_y.train.y[2] = -inf;
  RunCurves inf_x = good;
  inf_x.val.x[0] = inf;
  RunCurves x_only = good;
  x_only.val.y.clear();

  EXPECT_THROW(loss_plot_svg({}, PlotOptions{}), UsageError);
  for (const RunCurves& bad : {empty, mismatch, nan_y, inf_y, inf_x, x_only}) {
    EXPECT_THROW(loss_plot_svg({bad}, PlotOptions{}), UsageError) << bad.label;
    EXPECT_THROW(loss_plot_svg({good, bad}, PlotOptions{}), UsageError) << bad.label;
  }
  PlotOptions nan_reference;
  nan_reference.reference_y = nan;
  EXPECT_THROW(loss_plot_svg({good}, nan_reference), UsageError);
  PlotOptions tiny;
  tiny.width = 0;
  EXPECT_THROW(loss_plot_svg({good}, tiny), UsageError);
  EXPECT_NO_THROW(loss_plot_svg({good}, PlotOptions{}));
}

}  // namespace
}  // namespace canzona::train
