// Building blocks of the project's pictures (svg.h).
#include "canzona/common/svg.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

namespace canzona::svg {

std::string escape(std::string_view s) {
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
        out +=
            (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') ? ' ' : c;
    }
  }
  return out;
}

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

std::string sig(double v, int digits) {
  if (v == 0.0 || !std::isfinite(v)) return fixed(v, 0);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  if (magnitude < -4 || magnitude >= 6) {
    char buffer[64];
    auto result =
        std::to_chars(buffer, buffer + sizeof buffer, v, std::chars_format::scientific, digits - 1);
    return std::string(buffer, result.ptr);
  }
  const int decimals = std::max(0, digits - 1 - magnitude);
  std::string s = fixed(v, decimals);
  // Rounding may carry into one more digit ("9.995" -> "10.00"): drop the extra decimal.
  if (decimals > 0 && std::fabs(std::stod(s)) >= std::pow(10.0, magnitude + 1)) s.pop_back();
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

double nice_step(double span, int target) {
  const double raw = span / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double best = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (std::fabs(std::log(m * power / raw)) < std::fabs(std::log(best / raw))) best = m * power;
  }
  return best;
}

Axis make_axis(double lo, double hi, int target_ticks) {
  constexpr int kMaxTicks = 20;
  Axis axis{lo, hi, nice_step(hi - lo, target_ticks), 0, {}};
  axis.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(axis.step) + 1e-9)));
  const double first = std::ceil(lo / axis.step - 1e-9), last = std::floor(hi / axis.step + 1e-9);
  for (int i = 0; i <= kMaxTicks && first + i <= last; ++i)
    axis.ticks.push_back((first + i) * axis.step);
  return axis;
}

Unit pick_unit(double max, std::span<const Unit> units) {
  Unit chosen = units.front();
  for (const Unit& u : units)
    if (max >= u.scale) chosen = u;
  return chosen;
}

Unit flop_unit(double max) {
  static constexpr Unit kUnits[] = {{"FLOP", 1},    {"kFLOP", 1e3},  {"MFLOP", 1e6},
                                    {"GFLOP", 1e9}, {"TFLOP", 1e12}, {"PFLOP", 1e15}};
  return pick_unit(max, kUnits);
}

Unit byte_unit(double max) {
  static constexpr Unit kUnits[] = {{"B", 1},
                                    {"KiB", 1024.0},
                                    {"MiB", 1024.0 * 1024},
                                    {"GiB", 1024.0 * 1024 * 1024},
                                    {"TiB", 1024.0 * 1024 * 1024 * 1024}};
  return pick_unit(max, kUnits);
}

double text_width(std::string_view s, double font_size, bool bold) {
  const auto points = std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; });
  return (bold ? 0.7 : 0.62) * font_size * static_cast<double>(points);
}

Document::Document(double width, double height) : width_(width), height_(height) {}

void Document::text(double x, double y, std::string_view content, std::string_view attributes) {
  body_ += "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\"";
  if (!attributes.empty()) (body_ += ' ') += attributes;
  body_ += '>';  // not ">" + escape(...): GCC 12 warns falsely (-Wrestrict) on that operator+
  body_ += escape(content);
  body_ += "</text>\n";
}

void Document::line(double x1, double y1, double x2, double y2, std::string_view attributes) {
  body_ += "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" +
           px(y2) + "\" ";
  (body_ += attributes) += "/>\n";
}

void Document::rect(double x, double y, double w, double h, std::string_view attributes,
                    std::string_view tooltip) {
  body_ += "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(w) + "\" height=\"" +
           px(h) + "\" ";
  body_ += attributes;
  if (tooltip.empty()) {
    body_ += "/>\n";
  } else {
    body_ += "><title>" + escape(tooltip) + "</title></rect>\n";
  }
}

std::string Document::finish() const {
  auto dim = [](double v) { return v == std::floor(v) ? fixed(v, 0) : px(v); };
  const std::string w = dim(width_), h = dim(height_);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + w + "\" height=\"" +
         h + "\" viewBox=\"0 0 " + w + " " + h +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" +
         body_ + "</svg>\n";
}

}  // namespace canzona::svg
