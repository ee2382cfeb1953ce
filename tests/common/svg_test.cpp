// The pictures' building blocks (svg.h): units by hand (1 GiB = 2^30 bytes, 1 TFLOP = 10^12),
// significant digits, escaping, nice ticks and the document frame.
#include "canzona/common/svg.h"

#include <gtest/gtest.h>

#include <string>

namespace canzona::svg {
namespace {

TEST(SvgUnits, BytesInPowersOf1024AndFlopInPowersOf1000) {
  const double gib = 1073741824.0;  // 2^30
  EXPECT_EQ(byte_unit(1.5 * gib).name, "GiB");
  EXPECT_EQ(byte_unit(1.5 * gib).scale, gib);
  EXPECT_EQ(byte_unit(gib - 1).name, "MiB");
  EXPECT_EQ(byte_unit(gib - 1).scale, 1048576.0);
  EXPECT_EQ(byte_unit(100).name, "B");
  EXPECT_EQ(byte_unit(0).name, "B");  // no value reaches a unit: the smallest
  EXPECT_EQ(flop_unit(2.82e13).name, "TFLOP");
  EXPECT_EQ(flop_unit(2.82e13).scale, 1e12);
  EXPECT_EQ(flop_unit(9.99e11).name, "GFLOP");
  EXPECT_EQ(flop_unit(5e15).name, "PFLOP");
}

TEST(SvgNumbers, SignificantDigitsWithoutTrailingZerosOrLocale) {
  EXPECT_EQ(sig(1.8574, 3), "1.86");
  EXPECT_EQ(sig(16.1583, 3), "16.2");
  EXPECT_EQ(sig(20.0, 6), "20");
  EXPECT_EQ(sig(0.0312345, 3), "0.0312");
  EXPECT_EQ(sig(9.996, 3), "10");
  EXPECT_EQ(sig(0.0, 3), "0");
  EXPECT_EQ(sig(-2.5, 3), "-2.5");
  EXPECT_EQ(sig(1234567.0, 3), "1.23e+06");
  EXPECT_EQ(fixed(-0.001, 2), "0.00");
  EXPECT_EQ(fixed(2.5, 1), "2.5");
  EXPECT_EQ(px(12.345), "12.35");
}

TEST(SvgText, EscapesMarkupAndEstimatesWidthPerCodePoint) {
  EXPECT_EQ(escape("a<b&c>\"d'"), "a&lt;b&amp;c&gt;&quot;d&apos;");
  EXPECT_EQ(escape(std::string("x\x01y")), "x y");
  EXPECT_DOUBLE_EQ(text_width("abcd", 10), 4 * 6.2);
  EXPECT_DOUBLE_EQ(text_width("abcd", 10, true), 4 * 7.0);
  EXPECT_DOUBLE_EQ(text_width("\xc3\xa9t\xc3\xa9", 10), 3 * 6.2);  // "été": 3 code points
}

TEST(SvgAxis, NiceStepsAndTicksInsideTheRange) {
  EXPECT_EQ(nice_step(10, 5), 2);
  EXPECT_EQ(nice_step(0.9, 5), 0.2);
  EXPECT_EQ(nice_step(3.2, 5), 0.5);
  const Axis a = make_axis(0.3, 2.9);
  ASSERT_EQ(a.ticks.size(), 5u);  // 0.5, 1, 1.5, 2, 2.5
  EXPECT_EQ(a.step, 0.5);
  EXPECT_EQ(a.decimals, 1);
  EXPECT_DOUBLE_EQ(a.ticks.front(), 0.5);
  EXPECT_DOUBLE_EQ(a.ticks.back(), 2.5);
}

TEST(SvgDocument, FramesTheBodyWithSizeViewBoxAndWhiteBackground) {
  Document doc(720, 420.5);
  doc.text(1, 2, "a&b", "class=\"t\"");
  doc.rect(0, 0, 3, 4, "fill=\"red\"", "tip<");
  doc.line(0, 0, 1, 1, "stroke=\"black\"");
  const std::string svg = doc.finish();
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"720\" "
                      "height=\"420.50\" viewBox=\"0 0 720 420.50\"",
                      0),
            0u)
      << svg;
  EXPECT_NE(svg.find("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>"), std::string::npos);
  EXPECT_NE(svg.find("<text x=\"1.00\" y=\"2.00\" class=\"t\">a&amp;b</text>"), std::string::npos);
  EXPECT_NE(svg.find("fill=\"red\"><title>tip&lt;</title></rect>"), std::string::npos);
  EXPECT_NE(svg.find("<line x1=\"0.00\" y1=\"0.00\" x2=\"1.00\" y2=\"1.00\" stroke=\"black\"/>"),
            std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

}  // namespace
}  // namespace canzona::svg
