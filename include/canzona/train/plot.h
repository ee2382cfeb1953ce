// Loss curves as a standalone SVG (the convergence figure of docs/results.md): no dependency,
// one file.
#pragma once
#include <string>
#include <vector>

namespace canzona::train {

struct Curve {
  std::vector<double> x;  // step numbers, increasing
  std::vector<double> y;  // loss values (finite), same length as x
};

// One training run: its validation and training losses. Either curve may be empty, not both.
struct RunCurves {
  std::string label;  // legend text, e.g. "muon (lb-asc)"
  Curve val, train;
};

struct PlotOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label = "loss (nats/token)";
  double reference_y = -1.0;  // a horizontal line (e.g. unigram entropy); < 0 = none
  std::string reference_label;
  int width = 720, height = 420;
};

// The SVG document: one colour per run, validation solid and training dashed in that colour.
// Runs whose curves are bitwise identical (the same steps and the same doubles) are drawn once and
// named together in the legend ("muon (sc, lb-asc): bitwise identical"). x spans every step. y
// spans the losses from the first validation step on, with 5% margins, so the curves after the
// first steps stay readable; earlier losses above the range are clipped. Without a validation
// point after the first step, y spans every loss and the reference line. The reference line is
// drawn where it falls inside the range, else the caption names it. A caption below the plot says
// which rule applied. The legend sits between the title and the plot (inside the plot's lower
// left when that would leave the plot under 100 px). Text is XML-escaped. Throws UsageError
// when there are no runs, a run has no points, x and y differ in length, or a value is not finite.
std::string loss_plot_svg(const std::vector<RunCurves>& runs, const PlotOptions& options);

}  // namespace canzona::train
