// Stacked-bar SVG of simulated iterations (report.h). Plain SVG 1.1, no scripts or fonts beyond
// the generic sans-serif family.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "canzona/common/error.h"
#include "canzona/sim/sim_report.h"

namespace canzona::sim {

namespace {

struct Segment {
  const char* name;
  const char* color;
  double Breakdown::*field;
};

constexpr Segment kSegments[] = {
    {"forward-backward", "#4e79a7", &Breakdown::fwd_bwd_s},
    {"exposed DP comm", "#f28e2b", &Breakdown::dp_comm_exposed_s},
    {"optimizer compute", "#e15759", &Breakdown::optimizer_s},
    {"exposed TP comm", "#76b7b2", &Breakdown::tp_comm_s},
    {"exposed owner exchange", "#b07aa1", &Breakdown::dp_exchange_s},
    {"param sync", "#59a14f", &Breakdown::param_sync_s},
};

std::string num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about five ticks up to `top`.
double tick_step(double top) {
  double raw = top / 5.0;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10.0 * power;
}

}  // namespace

std::string render_svg(const std::string& title, const std::vector<ResultGroup>& groups) {
  const double bar_w = 30, bar_gap = 8, group_gap = 30, left = 70, top = 50, plot_h = 320;
  const double bottom = 90, legend_w = 170;
  double max_s = 0.0;
  std::size_t bars = 0;
  for (const auto& g : groups) {
    bars += g.results.size();
    for (const auto& r : g.results) max_s = std::max(max_s, r.iteration_s);
  }
  if (!std::isfinite(max_s)) {
    throw Error(str("simulate: internal error: iteration_s = ", max_s, " is not finite"));
  }
  if (max_s <= 0.0) max_s = 1.0;
  const double step = tick_step(max_s);
  const double axis_top = std::ceil(max_s / step) * step;
  const double plot_w = static_cast<double>(bars) * (bar_w + bar_gap) +
                        static_cast<double>(groups.size()) * group_gap;
  const double width = left + plot_w + legend_w, height = top + plot_h + bottom;
  auto y_of = [&](double seconds) { return top + plot_h - seconds / axis_top * plot_h; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) +
                    "\" height=\"" + num(height) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(left) + "\" y=\"24\" font-size=\"14\" font-weight=\"bold\">" +
         escape(title) + "</text>\n";
  for (double t = 0.0; t <= axis_top + step / 2; t += step) {
    double y = y_of(t);
    svg += "<line x1=\"" + num(left) + "\" x2=\"" + num(left + plot_w) + "\" y1=\"" + num(y) +
           "\" y2=\"" + num(y) + "\" stroke=\"#ddd\"/>\n";
    char label[32];
    std::snprintf(label, sizeof label, "%.3g s", t);
    svg += "<text x=\"" + num(left - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" +
           label + "</text>\n";
  }

  double x = left + group_gap / 2;
  for (const auto& g : groups) {
    const double group_x = x;
    for (const auto& r : g.results) {
      double base = 0.0;
      for (const auto& seg : kSegments) {
        double v = r.*(seg.field);
        if (v <= 0.0) continue;
        svg += "<rect x=\"" + num(x) + "\" y=\"" + num(y_of(base + v)) + "\" width=\"" +
               num(bar_w) + "\" height=\"" + num(y_of(base) - y_of(base + v)) + "\" fill=\"" +
               seg.color + "\"><title>" + plan::to_string(r.strategy) + " " + seg.name + ": " +
               std::to_string(v) + " s</title></rect>\n";
        base += v;
      }
      double cx = x + bar_w / 2, ly = top + plot_h + 8;
      svg += "<text transform=\"translate(" + num(cx) + "," + num(ly) +
             ") rotate(45)\" text-anchor=\"start\">" + plan::to_string(r.strategy) + "</text>\n";
      x += bar_w + bar_gap;
    }
    if (!g.label.empty()) {
      svg += "<text x=\"" + num((group_x + x - bar_gap) / 2) + "\" y=\"" +
             num(top + plot_h + bottom - 12) + "\" text-anchor=\"middle\" font-weight=\"bold\">" +
             escape(g.label) + "</text>\n";
    }
    x += group_gap;
  }
  svg += "<line x1=\"" + num(left) + "\" x2=\"" + num(left) + "\" y1=\"" + num(top) + "\" y2=\"" +
         num(top + plot_h) + "\" stroke=\"black\"/>\n";

  double ly = top;
  for (const auto& seg : kSegments) {
    svg += "<rect x=\"" + num(left + plot_w + 16) + "\" y=\"" + num(ly) +
           "\" width=\"12\" height=\"12\" fill=\"" + seg.color + "\"/>\n";
    svg += "<text x=\"" + num(left + plot_w + 34) + "\" y=\"" + num(ly + 10) + "\">" + seg.name +
           "</text>\n";
    ly += 18;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace canzona::sim
