// Loss-curve SVG (plot.h): well-formed markup, one polyline per curve mapping the data linearly
// into the plot area, nice ticks, escaping, the optional reference line and the usage errors.
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
  static const std::regex re("<rect class=\"plot-area\"[^>]*/>");
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
  const std::regex re("<text class=\"" + cls + "\"[^>]*>([^<]*)</text>");
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

Curve ramp(std::string label, std::size_t n, double x0, double dx, double y0, double dy) {
  Curve c;
  c.label = std::move(label);
  for (std::size_t i = 0; i < n; ++i) {
    c.x.push_back(x0 + dx * static_cast<double>(i));
    c.y.push_back(y0 + dy * static_cast<double>(i));
  }
  return c;
}

std::vector<Curve> two_curves() {
  Curve train = ramp("muon (train)", 11, 0, 10, 10.0, -0.5);  // x 0..100, y 10..5
  Curve val = ramp("muon (val)", 5, 20, 20, 9.0, -0.25);      // x 20..100, y 9..8
  val.dashed = true;
  return {train, val};
}

TEST(LossPlot, IsWellFormedSvg) {
  PlotOptions o;
  o.title = "convergence";
  const std::string svg = loss_plot_svg(two_curves(), o);
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
       {"convergence", "step", "loss (nats/token)", "muon (train)", "muon (val)"}) {
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  }
}

TEST(LossPlot, OnePolylinePerCurveWithOnePointPerValue) {
  for (std::size_t curves_n : {1u, 2u, 3u, 12u}) {
    std::vector<Curve> curves;
    for (std::size_t i = 0; i < curves_n; ++i) {
      curves.push_back(ramp(str("c", i), 1 + 3 * i, 1, 1, 5.0 + static_cast<double>(i), -0.1));
    }
    const std::string svg = loss_plot_svg(curves, PlotOptions{});
    const auto lines = polylines(svg);
    ASSERT_EQ(lines.size(), curves_n);
    EXPECT_EQ(count(svg, "<polyline"), curves_n);
    for (std::size_t i = 0; i < curves_n; ++i) {
      EXPECT_EQ(points_of(lines[i]).size(), curves[i].x.size()) << "curve " << i;
    }
  }
}

TEST(LossPlot, CurvesGetDistinctColoursAndDashingFollowsTheCurve) {
  std::vector<Curve> curves;
  for (int i = 0; i < 14; ++i) curves.push_back(ramp(str("c", i), 3, 0, 1, 1.0 + i, 0.1));
  curves[3].dashed = true;
  const auto lines = polylines(loss_plot_svg(curves, PlotOptions{}));
  ASSERT_EQ(lines.size(), curves.size());
  std::vector<std::string> colours;
  const std::regex stroke("stroke=\"([^\"]*)\"");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(lines[i], m, stroke)) << lines[i];
    for (const auto& seen : colours) EXPECT_NE(seen, m[1].str()) << "curve " << i;
    colours.push_back(m[1].str());
    const bool dashed = lines[i].find("stroke-dasharray") != std::string::npos;
    EXPECT_EQ(dashed, curves[i].dashed) << "curve " << i;
  }
}

TEST(LossPlot, PointsMapTheDataLinearlyIntoThePlotArea) {
  const auto curves = two_curves();
  const std::string svg = loss_plot_svg(curves, PlotOptions{});
  const Rect area = plot_area(svg);
  ASSERT_GT(area.w, 0);
  ASSERT_GT(area.h, 0);
  EXPECT_GE(area.x, 0);
  EXPECT_GE(area.y, 0);
  EXPECT_LE(area.x + area.w, 720);
  EXPECT_LE(area.y + area.h, 420);

  // x spans the data (0..100) exactly; y spans 5..10 plus 5% of the span (0.25) on each side.
  const double x_lo = 0, x_hi = 100, y_lo = 5 - 0.25, y_hi = 10 + 0.25;
  auto expected = [&](double x, double y) {
    return Point{area.x + (x - x_lo) / (x_hi - x_lo) * area.w,
                 area.y + area.h - (y - y_lo) / (y_hi - y_lo) * area.h};
  };
  const auto lines = polylines(svg);
  ASSERT_EQ(lines.size(), 2u);
  const double tol = 0.02;  // coordinates are written with two decimals
  for (std::size_t c = 0; c < curves.size(); ++c) {
    const auto pts = points_of(lines[c]);
    ASSERT_EQ(pts.size(), curves[c].x.size());
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const Point e = expected(curves[c].x[i], curves[c].y[i]);
      EXPECT_NEAR(pts[i].x, e.x, tol) << "curve " << c << " point " << i;
      EXPECT_NEAR(pts[i].y, e.y, tol) << "curve " << c << " point " << i;
    }
  }

  const auto train = points_of(lines[0]);
  EXPECT_NEAR(train.front().x, area.x, tol);          // smallest x at the left edge
  EXPECT_NEAR(train.back().x, area.x + area.w, tol);  // largest x at the right edge
  EXPECT_LT(train.front().y, train.back().y);         // the largest loss is drawn highest
  EXPECT_GT(train.front().y, area.y);                 // ... inside the top margin
  EXPECT_LT(train.back().y, area.y + area.h);         // the smallest above the bottom margin
  for (std::size_t i = 1; i < train.size(); ++i) {
    EXPECT_GT(train[i].x, train[i - 1].x);
    EXPECT_NEAR(train[i].x - train[i - 1].x, train[1].x - train[0].x, 2 * tol);  // equal dx
    EXPECT_NEAR(train[i].y - train[i - 1].y, train[1].y - train[0].y, 2 * tol);  // equal dy
  }
}

TEST(LossPlot, FlatAndSinglePointCurvesStayInsideThePlotArea) {
  Curve flat = ramp("flat", 4, 1, 1, 3.0, 0.0);
  Curve single = ramp("single", 1, 2, 1, 3.0, 0.0);
  for (const auto& curves : {std::vector<Curve>{flat}, std::vector<Curve>{single}}) {
    const std::string svg = loss_plot_svg(curves, PlotOptions{});
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
  far.label = "far";
  far.x = {1e17, 1e17 + 16, 1e17 + 32};
  far.y = {1e-300, 3e-300, 2e-300};
  Curve huge;
  huge.label = "huge";
  huge.x = {1, 2};
  huge.y = {1e200, 3e200};
  for (const Curve& c : {far, huge}) {
    const std::string svg = loss_plot_svg({c}, PlotOptions{});
    EXPECT_EQ(tag_balance_error(svg), "") << c.label;
    EXPECT_EQ(svg.find("nan"), std::string::npos) << c.label;
    EXPECT_EQ(svg.find("inf"), std::string::npos) << c.label;
    ASSERT_EQ(polylines(svg).size(), 1u);
    EXPECT_EQ(points_of(polylines(svg)[0]).size(), 3u - (c.label == "huge"));
  }
  Curve overflowing = huge;  // max - min overflows a double
  overflowing.y = {-1e308, 1e308};
  EXPECT_THROW(loss_plot_svg({overflowing}, PlotOptions{}), UsageError);
}

TEST(LossPlot, TicksAreFewNiceRoundNumbersInsideTheRange) {
  struct Case {
    double x0, dx, y0, dy;
  };
  const Case cases[] = {{0, 10, 10.0, -0.5},   {1, 1, 3.3, -0.01},   {100, 997, 11.0, -0.9},
                        {0, 0.001, 0.0, 1e-4}, {5, 5, 2.5e3, -10.0}, {0, 25000, 7.7, -0.013}};
  for (const Case& c : cases) {
    const Curve curve = ramp("c", 11, c.x0, c.dx, c.y0, c.dy);
    const std::string svg = loss_plot_svg({curve}, PlotOptions{});
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
  Curve c = ramp(nasty, 3, 0, 1, 2.0, -0.1);
  PlotOptions o;
  o.title = nasty + "T";
  o.x_label = nasty + "X";
  o.y_label = nasty + "Y";
  o.reference_y = 1.0;
  o.reference_label = nasty + "R";
  const std::string svg = loss_plot_svg({c}, o);
  EXPECT_EQ(svg.find(nasty), std::string::npos);
  for (const char* suffix : {"T", "X", "Y", "R"}) {
    EXPECT_NE(svg.find(escaped + suffix), std::string::npos) << suffix;
  }
  EXPECT_NE(svg.find(">" + escaped + "</text>"), std::string::npos);  // the legend entry
  EXPECT_EQ(tag_balance_error(svg), "");
  EXPECT_TRUE(entities_are_valid(svg));
}

TEST(LossPlot, ReferenceLineOnlyWhenReferenceIsNonNegative) {
  const auto curves = two_curves();  // y in [5, 10]
  PlotOptions without;
  without.reference_label = "unigram entropy";
  const std::string plain = loss_plot_svg(curves, without);
  EXPECT_EQ(plain.find("class=\"reference\""), std::string::npos);
  EXPECT_EQ(plain.find("unigram entropy"), std::string::npos);

  PlotOptions with = without;
  with.reference_y = 2.0;  // below every curve: the y axis must stretch down to it
  const std::string svg = loss_plot_svg(curves, with);
  ASSERT_EQ(count(svg, "class=\"reference\""), 1u);
  EXPECT_NE(svg.find("unigram entropy"), std::string::npos);
  EXPECT_EQ(tag_balance_error(svg), "");

  static const std::regex re("<line class=\"reference\"[^>]*/>");
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
  EXPECT_EQ(count(loss_plot_svg(curves, zero), "class=\"reference\""), 1u);
}

TEST(LossPlot, RejectsBadInputWithUsageError) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const Curve good = ramp("ok", 3, 0, 1, 2.0, -0.1);
  Curve empty;
  empty.label = "empty";
  Curve mismatch = good;
  mismatch.y.pop_back();
  Curve nan_y = good;
  nan_y.y[1] = nan;
  Curve inf_y = good;
  inf_y.y[2] = -inf;
  Curve inf_x = good;
  inf_x.x[0] = inf;
  Curve x_only = good;
  x_only.y.clear();

  EXPECT_THROW(loss_plot_svg({}, PlotOptions{}), UsageError);
  for (const Curve& bad : {empty, mismatch, nan_y, inf_y, inf_x, x_only}) {
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
