// Loss curves as a standalone SVG (the convergence figure of docs/results.md): no dependency,
// one file.
#pragma once
#include <string>
#include <vector>

namespace canzona::train {

struct Curve {
  std::string label;      // legend text, e.g. "muon (val)"
  std::vector<double> x;  // step numbers, increasing
  std::vector<double> y;  // loss values (finite), same length as x
  bool dashed = false;
};

struct PlotOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label = "loss (nats/token)";
  double reference_y = -1.0;  // a horizontal line (e.g. unigram entropy); < 0 = none
  std::string reference_label;
  int width = 720, height = 420;
};

// The SVG document. Axes span the data (y from min to max over all curves and the reference line,
// with 5% margins), with labelled ticks; one colour per curve and a legend. Text is XML-escaped.
// Throws UsageError when there are no curves, a curve is empty, x and y differ in length, or a
// value is not finite.
std::string loss_plot_svg(const std::vector<Curve>& curves, const PlotOptions& options);

}  // namespace canzona::train
