// Stacked-bar SVG of simulated iterations (sim_report.h). Plain SVG 1.1 (canzona/common/svg.h).
//
// Layout: one panel per scale. The first panel holds every bar; when, sorted by their tallest bar,
// the strategies drop to less than half at some point (after sc's, whose unsharded optimizer step
// dwarfs the rest), a second panel below repeats those after the drop on their own axis, so the
// comparison between them stays readable. Each bar carries its iteration time and its iteration
// speedup over its group's first strategy (iteration_speedup, the table's iter-speedup). The legend
// sits right of the panels, inside the canvas, which is sized from estimated text widths
// (svg::text_width).
#include "canzona/common/svg.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

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
    {"exposed EP comm", "#9c755f", &Breakdown::ep_comm_s},
    {"exposed DP comm", "#f28e2b", &Breakdown::dp_comm_exposed_s},
    {"optimizer compute", "#e15759", &Breakdown::optimizer_s},
    {"exposed TP comm", "#76b7b2", &Breakdown::tp_comm_s},
    {"exposed owner exchange", "#b07aa1", &Breakdown::dp_exchange_s},
    {"param sync", "#59a14f", &Breakdown::param_sync_s},
};

constexpr double kBarW = 46, kBarGap = 10, kGroupGap = 30, kLeft = 78, kPlotH = 240;
constexpr double kLabelRoom = 30;  // above the tallest bar: its two number lines
constexpr double kFont = 11, kSmallFont = 10;

// The strategies whose bars dwarf the rest: sorted by their largest bar, the ones above the first
// drop to less than half. Empty when there is no such drop or every strategy would be left out.
std::set<plan::Strategy> dominant(const std::vector<ResultGroup>& groups) {
  std::vector<std::pair<double, plan::Strategy>> tallest;
  for (const auto& g : groups)
    for (const auto& r : g.results) {
      auto it = std::find_if(tallest.begin(), tallest.end(),
                             [&](const auto& t) { return t.second == r.strategy; });
      if (it == tallest.end())
        tallest.push_back({r.iteration_s, r.strategy});
      else
        it->first = std::max(it->first, r.iteration_s);
    }
  std::sort(tallest.begin(), tallest.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::set<plan::Strategy> out;
  for (std::size_t i = 0; i + 1 < tallest.size(); ++i) {
    out.insert(tallest[i].second);
    if (tallest[i].first > 2.0 * tallest[i + 1].first) return out;
  }
  return {};
}

std::string joined(const std::set<plan::Strategy>& strategies) {
  std::string out;
  for (plan::Strategy s : strategies)
    out += std::string(out.empty() ? "" : ", ") + plan::to_string(s);
  return out;
}

// The widest the rotated strategy names reach below and right of their bar's centre.
double name_reach(const std::vector<ResultGroup>& groups) {
  double widest = 0;
  for (const auto& g : groups)
    for (const auto& r : g.results)
      widest = std::max(widest, svg::text_width(plan::to_string(r.strategy), kFont));
  return widest * std::sqrt(0.5) + 12;
}

// One panel whose plot area starts at y = `top`: the bars of `groups` less `skip`, an axis in
// seconds, the numbers on the bars, the names under them. Returns the panel's height below `top`.
double panel(svg::Document& doc, double top, const std::string& heading,
             const std::vector<ResultGroup>& groups, const std::set<plan::Strategy>& skip) {
  double max_s = 0.0;
  for (const auto& g : groups)
    for (const auto& r : g.results)
      if (!skip.count(r.strategy)) max_s = std::max(max_s, r.iteration_s);
  if (max_s <= 0.0) max_s = 1.0;
  // Room above the tallest bar for its numbers.
  const double wanted = max_s * kPlotH / (kPlotH - kLabelRoom);
  const double step = svg::nice_step(wanted, 5);
  const double axis_top = std::ceil(wanted / step - 1e-9) * step;
  auto y_of = [&](double seconds) { return top + kPlotH - seconds / axis_top * kPlotH; };

  double plot_w = 0;
  for (const auto& g : groups) {
    std::size_t n = 0;
    for (const auto& r : g.results) n += !skip.count(r.strategy);
    plot_w += static_cast<double>(n) * (kBarW + kBarGap) + kGroupGap;
  }
  if (!heading.empty())
    doc.text(kLeft, top - 10, heading, "class=\"panel-title\" font-weight=\"bold\"");
  for (double t = 0.0; t <= axis_top + step / 2; t += step) {
    doc.line(kLeft, y_of(t), kLeft + plot_w, y_of(t), "stroke=\"#ddd\"");
    doc.text(kLeft - 6, y_of(t) + 4, svg::sig(t, 3), "class=\"tick-y\" text-anchor=\"end\"");
  }
  const std::string label_x = svg::px(18), label_y = svg::px(top + kPlotH / 2);
  doc.text(18, top + kPlotH / 2, "iteration time (s)",
           "class=\"axis-label y-label\" text-anchor=\"middle\" transform=\"rotate(-90 " + label_x +
               " " + label_y + ")\"");

  const double reach = name_reach(groups);
  double x = kLeft + kGroupGap / 2;
  for (const auto& g : groups) {
    const double group_x = x;
    for (const auto& r : g.results) {
      if (skip.count(r.strategy)) continue;
      const std::string name = plan::to_string(r.strategy);
      double base = 0.0;
      for (const auto& seg : kSegments) {
        const double v = r.*(seg.field);
        if (v <= 0.0) continue;
        doc.rect(x, y_of(base + v), kBarW, y_of(base) - y_of(base + v),
                 str("fill=\"", seg.color, "\""), str(name, " ", seg.name, ": ", v, " s"));
        base += v;
      }
      const double cx = x + kBarW / 2, bar_top = y_of(r.iteration_s);
      doc.text(cx, bar_top - 16, svg::sig(r.iteration_s, 3) + " s",
               "class=\"bar-time\" text-anchor=\"middle\" font-size=\"10\"");
      doc.text(cx, bar_top - 4, svg::fixed(iteration_speedup(g.results.front(), r), 2) + "x",
               "class=\"bar-speedup\" text-anchor=\"middle\" font-size=\"10\" fill=\"#555\"");
      const std::string at = svg::px(cx) + "," + svg::px(top + kPlotH + 12);
      doc.raw("<text class=\"bar-name\" transform=\"translate(" + at +
              ") rotate(45)\" text-anchor=\"start\">" + svg::escape(name) + "</text>\n");
      x += kBarW + kBarGap;
    }
    if (!g.label.empty())
      doc.text((group_x + x - kBarGap) / 2, top + kPlotH + reach + 14, g.label,
               "class=\"group-label\" text-anchor=\"middle\" font-weight=\"bold\"");
    x += kGroupGap;
  }
  doc.line(kLeft, top, kLeft, top + kPlotH, "stroke=\"black\"");
  doc.line(kLeft, top + kPlotH, kLeft + plot_w, top + kPlotH, "stroke=\"black\"");
  const bool labelled = std::any_of(groups.begin(), groups.end(),
                                    [](const ResultGroup& g) { return !g.label.empty(); });
  return kPlotH + reach + (labelled ? 24 : 4);
}

}  // namespace

std::string render_svg(const std::string& title, const std::vector<ResultGroup>& groups) {
  double plot_w = 0, max_s = 0;
  for (const auto& g : groups) {
    plot_w += static_cast<double>(g.results.size()) * (kBarW + kBarGap) + kGroupGap;
    for (const auto& r : g.results) max_s = std::max(max_s, r.iteration_s);
  }
  if (!std::isfinite(max_s)) {
    throw Error(str("simulate: internal error: iteration_s = ", max_s, " is not finite"));
  }
  std::vector<const Segment*> shown;  // segments some bar has
  double legend_w = 0;
  for (const auto& seg : kSegments) {
    const bool any = std::any_of(groups.begin(), groups.end(), [&](const ResultGroup& g) {
      return std::any_of(g.results.begin(), g.results.end(),
                         [&](const Breakdown& r) { return r.*(seg.field) > 0.0; });
    });
    if (!any) continue;
    shown.push_back(&seg);
    legend_w = std::max(legend_w, 34 + svg::text_width(seg.name, kFont));
  }
  const std::set<plan::Strategy> big = dominant(groups);
  const std::string big_names = joined(big);

  const double panel_top = 80;
  // Heights first (a dry run), then the document at its size.
  svg::Document scratch(1, 1);
  const double first_h = panel(scratch, panel_top, "all strategies", groups, {});
  const double second_top = panel_top + first_h + 40;
  const double second_h = big.empty() ? 0 : panel(scratch, second_top, "", groups, big);
  const double height = (big.empty() ? panel_top + first_h : second_top + second_h) + 10;
  const double legend_x = kLeft + plot_w + 16;
  const std::string first =
      groups.empty() || groups.front().results.empty()
          ? std::string("the first strategy")
          : std::string(plan::to_string(groups.front().results.front().strategy));
  const std::string caption = "each bar: iteration time and speedup over " + first;
  const std::string second_heading = "without " + big_names + ", on its own scale";
  // Wide enough for the legend, the names under the last bar, the title, caption and headings.
  double width = std::max({legend_x + legend_w + 10, kLeft + plot_w + name_reach(groups),
                           kLeft + svg::text_width(title, 14, true) + 10,
                           kLeft + svg::text_width(caption, kFont) + 10});
  if (!big.empty())
    width = std::max(width, kLeft + svg::text_width(second_heading, kFont, true) + 10);
  for (const auto& g : groups)
    width = std::max(width, kLeft + svg::text_width(g.label, kFont, true) + 10);
  svg::Document doc(std::ceil(width), std::ceil(height));
  doc.text(kLeft, 24, title, "class=\"title\" font-size=\"14\" font-weight=\"bold\"");
  doc.text(kLeft, 42, caption, "class=\"caption\" fill=\"#555\"");
  panel(doc, panel_top, big.empty() ? "" : "all strategies", groups, {});
  if (!big.empty()) panel(doc, second_top, second_heading, groups, big);
  double ly = panel_top;
  for (const Segment* seg : shown) {
    doc.rect(legend_x, ly, 12, 12, str("fill=\"", seg->color, "\""));
    doc.text(legend_x + 18, ly + 10, seg->name, "class=\"legend-label\"");
    ly += 18;
  }
  return doc.finish();
}

}  // namespace canzona::sim
