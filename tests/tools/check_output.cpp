// canzona_check_output: reads back a file a CLI test wrote and checks that it is what it claims to
// be, so a test cannot pass on a file that is missing, empty, truncated or full of NaNs.
//
// Usage: canzona_check_output FILE KIND [CHECK...]
//
// KIND
//   json   FILE parses as strict JSON (RFC 8259; NaN and Infinity are not JSON, and the writer
//          turns them into null, which every numeric check rejects).
//   trace  json, and a Chrome trace: {"traceEvents": [...]} or a bare array of events; every event
//          an object with a string "ph" and integral "pid" and "tid"; every event but metadata
//          ("M") a string "name" and a finite "ts" >= 0; complete events ("X") a finite "dur" >= 0.
//   svg    well-formed XML (xml_reader.h: one root, tags balanced, attributes quoted and unique)
//          whose root element is <svg> in the SVG namespace with positive width and height.
//
// CHECKs for json and trace. PATH is a JSON pointer ("/balance/dp/flops", "/tp.groups"); a segment
// "*" matches every member of an object or element of an array, and must match at least one.
//   PATH                 present
//   PATH:TYPE            TYPE is number, int (a number with an integral value), string, bool, array
//                        or object; may be followed by a comparison, e.g. /idle_ranks:int>=0
//   PATH OP VALUE        OP is == != < <= > >=; a number must be finite; true and false compare
//                        a boolean; another VALUE that is not a number compares strings (== and
//                        != only; quote it, "2", to compare a string that reads as a number;
//                        /key== means the empty string)
//   PATH~=LITERAL        printf("%.<d>f", value) equals LITERAL, d its decimals: "the JSON value is
//                        what the table printed"
//   PATH#OP N            the array or object has a size satisfying OP N
//   In place of PATH, ratio(A,B) (A / B) or sum(A,B,...), each argument a single value or a sum
//   P1+P2 of single values (no "*"), compared with OP VALUE or ~=LITERAL ("the table's speedup is
//   what the README says").
//   VALUE may be @PATH2[+@PATH3...]: the sum of other numbers. A "*" in PATH2 stands for the member
//   the same-numbered "*" of PATH matched. Comparisons with a sum allow a relative rounding
//   tolerance of 1e-9 (== within it, <= and >= up to it over, < and > by more than it).
//
// CHECKs for svg. ELEM is an element name, optionally with one attribute filter: rect[fill=#2a6].
//   count(ELEM)OP N      number of matching elements
//   text(STRING)         some element's own text contains STRING
//   ELEM@ATTR OP N       every matching element has ATTR, a finite number satisfying OP N
//   maxmean(ELEM@ATTR,FIRST,COUNT)~=VALUE
//                        max / mean of ATTR over the matching elements carrying ATTR, numbers
//                        FIRST..FIRST+COUNT-1 in document order, equals
//                        VALUE to its printed digits (+ 1e-5 relative for the SVG's own rounding)
//
// Exit status: 0 and "FILE: N checks passed" on stdout; 1 and one line "canzona_check_output: FILE:
// <what is wrong>" on stderr for a failed check; 2 for a malformed command line.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "xml_reader.h"

namespace {

using canzona::test_tools::Element;
using nlohmann::json;

// A failed check; main prints what() as the one line.
struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A malformed CHECK argument (exit 2).
struct BadCheck : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------- numbers and comparisons

bool parse_number(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end != nullptr && *end == '\0' && std::isfinite(out);
}

bool is_op(const std::string& op) {
  return op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=";
}

// Splits "OPVALUE" into the operator and the rest.
void split_op(const std::string& text, std::string& op, std::string& value) {
  std::size_t n = 0;
  while (n < text.size() && n < 2 && std::string("=!<>").find(text[n]) != std::string::npos) ++n;
  op = text.substr(0, n);
  value = text.substr(n);
  if (!is_op(op)) throw BadCheck("bad operator in '" + text + "' (expected == != < <= > >=)");
}

bool compare(double x, const std::string& op, double y, double rel_tol = 0.0) {
  const double tol = rel_tol * std::max(std::fabs(x), std::fabs(y));
  if (op == "==") return std::fabs(x - y) <= tol;
  if (op == "!=") return std::fabs(x - y) > tol;
  if (op == "<") return x < y - tol;
  if (op == "<=") return x <= y + tol;
  if (op == ">") return x > y + tol;
  return x >= y - tol;
}

std::string show(double x) {
  std::ostringstream os;
  os.precision(17);
  os << x;
  return os.str();
}

// ---------------------------------------------------------------- JSON paths

// One node a path matched, with the members its "*" segments took.
struct Match {
  std::string pointer;
  const json* value;
  std::vector<std::string> stars;
};

std::vector<std::string> split_path(const std::string& path) {
  if (path.empty() || path[0] != '/') throw BadCheck("path '" + path + "' must start with '/'");
  std::vector<std::string> out;
  std::size_t begin = 1;
  while (true) {
    std::size_t end = path.find('/', begin);
    std::string seg =
        path.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    std::string unescaped;
    for (std::size_t i = 0; i < seg.size(); ++i) {
      if (seg[i] == '~' && i + 1 < seg.size() && (seg[i + 1] == '0' || seg[i + 1] == '1')) {
        unescaped += seg[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        unescaped += seg[i];
      }
    }
    out.push_back(unescaped);
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return out;
}

// Every node `path` names in `root`. Throws CheckFailed naming the first missing step.
std::vector<Match> resolve(const json& root, const std::string& path) {
  std::vector<Match> current{{"", &root, {}}};
  for (const std::string& seg : split_path(path)) {
    std::vector<Match> next;
    for (const Match& m : current) {
      const json& v = *m.value;
      if (seg == "*") {
        if (v.is_array()) {
          for (std::size_t i = 0; i < v.size(); ++i) {
            Match n{m.pointer + "/" + std::to_string(i), &v[i], m.stars};
            n.stars.push_back(std::to_string(i));
            next.push_back(n);
          }
        } else if (v.is_object()) {
          for (auto it = v.begin(); it != v.end(); ++it) {
            Match n{m.pointer + "/" + it.key(), &it.value(), m.stars};
            n.stars.push_back(it.key());
            next.push_back(n);
          }
        } else {
          throw CheckFailed(m.pointer + " is " + v.type_name() + ", not an array or object");
        }
        if (v.empty()) throw CheckFailed(m.pointer + "/*: " + m.pointer + " is empty");
      } else if (v.is_object()) {
        if (!v.contains(seg)) throw CheckFailed("key '" + m.pointer + "/" + seg + "' is absent");
        next.push_back({m.pointer + "/" + seg, &v.at(seg), m.stars});
      } else if (v.is_array()) {
        double index = 0;
        if (!parse_number(seg, index) || index < 0 || index != std::floor(index)) {
          throw CheckFailed(m.pointer + " is an array; '" + seg + "' is not an index");
        }
        if (index >= static_cast<double>(v.size())) {
          throw CheckFailed(m.pointer + "/" + seg + " is absent (array of " +
                            std::to_string(v.size()) + ")");
        }
        next.push_back({m.pointer + "/" + seg, &v[static_cast<std::size_t>(index)], m.stars});
      } else {
        throw CheckFailed("key '" + m.pointer + "/" + seg + "' is absent (" +
                          (m.pointer.empty() ? "root" : m.pointer) + " is " + v.type_name() + ")");
      }
    }
    current = std::move(next);
  }
  return current;
}

double number_at(const Match& m) {
  const json& v = *m.value;
  if (v.is_null()) throw CheckFailed(m.pointer + " is null (a NaN or infinity when written?)");
  if (!v.is_number()) throw CheckFailed(m.pointer + " is " + v.type_name() + ", not a number");
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw CheckFailed(m.pointer + " = " + show(x) + " is not finite");
  return x;
}

// "@/a/*/b+@/c+2": the sum, with each "*" replaced by the member `stars` holds.
double sum_of_refs(const json& root, const std::string& expr,
                   const std::vector<std::string>& stars) {
  double total = 0.0;
  std::size_t begin = 0;
  while (begin <= expr.size()) {
    std::size_t end = expr.find('+', begin);
    std::string term =
        expr.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    double literal = 0;
    if (!term.empty() && term[0] == '@') {
      std::string path;
      std::size_t star = 0;
      for (const std::string& seg : split_path(term.substr(1))) {
        if (seg == "*") {
          if (star >= stars.size())
            throw BadCheck("'" + term + "' has more '*' than the left side");
          path += "/" + stars[star++];
        } else {
          path += "/" + seg;
        }
      }
      const auto matches = resolve(root, path);
      total += number_at(matches.front());
    } else if (parse_number(term, literal)) {
      total += literal;
    } else {
      throw BadCheck("bad term '" + term + "' in '" + expr + "'");
    }
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return total;
}

// "\"2\"": a string that would otherwise read as a number.
bool is_quoted(const std::string& value) {
  return value.size() >= 2 && value.front() == '"' && value.back() == '"';
}

bool type_matches(const json& v, const std::string& type) {
  if (type == "number") return v.is_number();
  if (type == "int") {
    if (!v.is_number()) return false;
    const double x = v.get<double>();
    return std::isfinite(x) && x == std::floor(x);
  }
  if (type == "string") return v.is_string();
  if (type == "bool") return v.is_boolean();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  throw BadCheck("unknown type '" + type + "' (number, int, string, bool, array, object)");
}

// "ratio(/a,/b)" = a / b, "sum(/a,/b,...)" = a + b + ...: one number, named by the expression.
// An argument may itself be a sum, "/a+/b".
json computed(const json& root, const std::string& expr) {
  const std::size_t open = expr.find('('), close = expr.rfind(')');
  if (close != expr.size() - 1) throw BadCheck("bad expression '" + expr + "'");
  const std::string fn = expr.substr(0, open);
  std::vector<double> args;
  std::stringstream in(expr.substr(open + 1, close - open - 1));
  std::string path;
  std::string arg;
  while (std::getline(in, arg, ',')) {
    double total = 0;
    std::stringstream terms(arg);
    while (std::getline(terms, path, '+')) {
      const auto matches = resolve(root, path);
      if (matches.size() != 1) throw BadCheck("'" + path + "' in " + fn + "() must name one value");
      total += number_at(matches.front());
    }
    args.push_back(total);
  }
  if (fn == "ratio") {
    if (args.size() != 2) throw BadCheck("ratio() takes two paths: '" + expr + "'");
    if (args[1] == 0) throw CheckFailed(expr + ": division by zero");
    return args[0] / args[1];
  }
  if (fn != "sum" || args.empty()) throw BadCheck("unknown expression '" + expr + "'");
  double total = 0;
  for (double a : args) total += a;
  return total;
}

void check_json(const json& root, const std::string& check) {
  const bool expression = check.rfind("ratio(", 0) == 0 || check.rfind("sum(", 0) == 0;
  const std::size_t cut = check.find_first_of(":#~=!<>", expression ? check.find(')') : 0);
  const std::string path = check.substr(0, cut);
  std::string rest = cut == std::string::npos ? "" : check.substr(cut);
  std::string type;
  if (!rest.empty() && rest[0] == ':') {
    const std::size_t end = rest.find_first_of("#~=!<>");
    type = rest.substr(1, end == std::string::npos ? std::string::npos : end - 1);
    rest = end == std::string::npos ? "" : rest.substr(end);
  }
  json value_of_expression;
  std::vector<Match> matches;
  if (expression) {
    value_of_expression = computed(root, path);
    matches.push_back({path, &value_of_expression, {}});
  } else {
    matches = resolve(root, path);
  }
  for (const Match& m : matches) {
    const json& v = *m.value;
    if (!type.empty() && !type_matches(v, type)) {
      throw CheckFailed(m.pointer + " = " + v.dump() + " is not of type " + type);
    }
    if (rest.empty()) continue;
    if (rest[0] == '#') {
      if (!v.is_array() && !v.is_object()) {
        throw CheckFailed(m.pointer + " is " + v.type_name() + ", it has no size");
      }
      std::string op, value;
      split_op(rest.substr(1), op, value);
      double n = 0;
      if (!parse_number(value, n)) throw BadCheck("bad size '" + value + "' in '" + check + "'");
      if (!compare(static_cast<double>(v.size()), op, n)) {
        throw CheckFailed(m.pointer + " has " + std::to_string(v.size()) + " entries, expected " +
                          op + " " + value);
      }
      continue;
    }
    if (rest.rfind("~=", 0) == 0) {
      const std::string literal = rest.substr(2);
      const std::size_t dot = literal.find('.');
      const int digits = dot == std::string::npos ? 0 : static_cast<int>(literal.size() - dot - 1);
      char printed[64];
      std::snprintf(printed, sizeof printed, "%.*f", digits, number_at(m));
      if (literal != printed) {
        throw CheckFailed(m.pointer + " = " + show(number_at(m)) + " prints as " + printed +
                          ", expected " + literal);
      }
      continue;
    }
    std::string op, value;
    split_op(rest, op, value);
    double y = 0;
    const bool refs = !value.empty() && value[0] == '@';
    if (refs) {
      y = sum_of_refs(root, value, m.stars);
    } else if ((value == "true" || value == "false") && v.is_boolean()) {
      if (op != "==" && op != "!=") throw BadCheck("'" + value + "' is not a number in " + check);
      if ((v.get<bool>() == (value == "true")) != (op == "==")) {
        throw CheckFailed(m.pointer + " = " + v.dump() + ", expected " + op + " " + value);
      }
      continue;
    } else if (is_quoted(value) || !parse_number(value, y)) {
      if (op != "==" && op != "!=") throw BadCheck("'" + value + "' is not a number in " + check);
      if (is_quoted(value)) value = value.substr(1, value.size() - 2);
      if (!v.is_string()) throw CheckFailed(m.pointer + " = " + v.dump() + " is not a string");
      if ((v.get<std::string>() == value) != (op == "==")) {
        throw CheckFailed(m.pointer + " = " + v.dump() + ", expected " + op + " \"" + value + "\"");
      }
      continue;
    }
    const double x = number_at(m);
    if (!compare(x, op, y, refs ? 1e-9 : 0.0)) {
      throw CheckFailed(m.pointer + " = " + show(x) + ", expected " + op + " " +
                        (refs ? value + " = " : "") + show(y));
    }
  }
}

void check_trace(const json& root) {
  const json* events = &root;
  if (root.is_object()) {
    if (!root.contains("traceEvents")) throw CheckFailed("key '/traceEvents' is absent");
    events = &root.at("traceEvents");
  }
  if (!events->is_array()) throw CheckFailed("trace events are not an array");
  if (events->empty()) throw CheckFailed("trace has no events");
  std::size_t timed = 0;
  for (std::size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    const std::string where = "event " + std::to_string(i);
    if (!e.is_object()) throw CheckFailed(where + " is not an object");
    if (!e.contains("ph") || !e["ph"].is_string()) throw CheckFailed(where + " has no string ph");
    for (const char* key : {"pid", "tid"}) {
      if (!e.contains(key) || !type_matches(e[key], "int") || e[key].get<double>() < 0) {
        throw CheckFailed(where + " has no integral " + key + " >= 0");
      }
    }
    const std::string ph = e["ph"].get<std::string>();
    if (ph == "M") continue;
    ++timed;
    if (!e.contains("name") || !e["name"].is_string()) throw CheckFailed(where + " has no name");
    for (const char* key : {"ts", "dur"}) {
      if (std::string(key) == "dur" && ph != "X") continue;
      if (!e.contains(key) || !e[key].is_number() || !std::isfinite(e[key].get<double>()) ||
          e[key].get<double>() < 0) {
        throw CheckFailed(where + " (" + e["name"].get<std::string>() + ") has no finite " + key +
                          " >= 0");
      }
    }
  }
  if (timed == 0) throw CheckFailed("trace has only metadata events");
}

// "rect" or "rect[fill=#2a6]".
bool selects(const Element& e, const std::string& selector) {
  const std::size_t open = selector.find('[');
  if (open == std::string::npos) return e.name == selector;
  if (selector.back() != ']') throw BadCheck("bad selector '" + selector + "'");
  const std::string filter = selector.substr(open + 1, selector.size() - open - 2);
  const std::size_t eq = filter.find('=');
  if (eq == std::string::npos) throw BadCheck("bad filter '" + filter + "' (expected attr=value)");
  const auto it = e.attrs.find(filter.substr(0, eq));
  return e.name == selector.substr(0, open) && it != e.attrs.end() &&
         it->second == filter.substr(eq + 1);
}

// "maxmean(ELEM@ATTR,FIRST,COUNT)~=LITERAL": max / mean of ATTR over the matching elements that
// carry ATTR, numbers FIRST .. FIRST+COUNT-1 in document order, equals LITERAL within half its last
// digit plus 1e-5 relative (the SVG prints coordinates to about six digits): bar heights show the
// balance the table reports.
void check_max_over_mean(const std::vector<Element>& elements, const std::string& check) {
  const std::size_t close = check.find(')');
  if (close == std::string::npos || check.compare(close + 1, 2, "~=") != 0) {
    throw BadCheck("bad check '" + check + "' (expected maxmean(ELEM@ATTR,FIRST,COUNT)~=VALUE)");
  }
  std::vector<std::string> args;
  std::stringstream in(check.substr(8, close - 8));
  for (std::string arg; std::getline(in, arg, ',');) args.push_back(arg);
  double first = 0, count = 0, expected = 0;
  const std::string literal = check.substr(close + 3);
  const std::size_t at = args.empty() ? std::string::npos : args[0].rfind('@');
  if (args.size() != 3 || at == std::string::npos || !parse_number(args[1], first) ||
      !parse_number(args[2], count) || count < 1 || !parse_number(literal, expected)) {
    throw BadCheck("bad check '" + check + "'");
  }
  const std::string selector = args[0].substr(0, at), attr = args[0].substr(at + 1);
  std::vector<double> values;
  for (const Element& e : elements) {
    if (!selects(e, selector)) continue;
    const auto it = e.attrs.find(attr);
    double x = 0;
    if (it == e.attrs.end()) continue;  // e.g. a background <rect> without y
    if (!parse_number(it->second, x)) {
      throw CheckFailed("a <" + selector + "> has no numeric " + attr + " ('" + it->second + "')");
    }
    values.push_back(x);
  }
  if (values.size() < first + count) {
    throw CheckFailed(std::to_string(values.size()) + " <" + selector +
                      "> elements, expected at least " + show(first + count));
  }
  double top = 0, sum = 0;
  for (std::size_t i = static_cast<std::size_t>(first); i < first + count; ++i) {
    top = std::max(top, values[i]);
    sum += values[i];
  }
  if (sum <= 0) throw CheckFailed("the selected " + attr + " values sum to " + show(sum));
  const double ratio = top / (sum / count);
  const std::size_t dot = literal.find('.');
  const double half_digit =
      0.5 * std::pow(10.0, -(dot == std::string::npos ? 0.0 : double(literal.size() - dot - 1)));
  if (std::fabs(ratio - expected) > half_digit + 1e-5 * std::fabs(expected)) {
    throw CheckFailed("max/mean = " + show(ratio) + ", expected " + literal);
  }
}

void check_svg(const std::vector<Element>& elements, const std::string& check) {
  if (check.rfind("maxmean(", 0) == 0) return check_max_over_mean(elements, check);
  if (check.rfind("text(", 0) == 0) {
    if (check.back() != ')') throw BadCheck("bad check '" + check + "'");
    const std::string wanted = check.substr(5, check.size() - 6);
    for (const Element& e : elements) {
      if (e.text.find(wanted) != std::string::npos) return;
    }
    throw CheckFailed("no element's text contains '" + wanted + "'");
  }
  if (check.rfind("count(", 0) == 0) {
    const std::size_t close = check.find(')');
    if (close == std::string::npos) throw BadCheck("bad check '" + check + "'");
    const std::string selector = check.substr(6, close - 6);
    std::string op, value;
    split_op(check.substr(close + 1), op, value);
    double n = 0;
    if (!parse_number(value, n)) throw BadCheck("bad count '" + value + "'");
    std::size_t count = 0;
    for (const Element& e : elements) count += selects(e, selector);
    if (!compare(static_cast<double>(count), op, n)) {
      throw CheckFailed(std::to_string(count) + " <" + selector + "> elements, expected " + op +
                        " " + value);
    }
    return;
  }
  const std::size_t at =
      check.find('@', check.find(']') == std::string::npos ? 0 : check.find(']'));
  if (at == std::string::npos) throw BadCheck("bad svg check '" + check + "'");
  const std::string selector = check.substr(0, at);
  const std::size_t op_at = check.find_first_of("=!<>", at);
  if (op_at == std::string::npos) throw BadCheck("bad svg check '" + check + "'");
  const std::string attr = check.substr(at + 1, op_at - at - 1);
  std::string op, value;
  split_op(check.substr(op_at), op, value);
  double bound = 0;
  if (!parse_number(value, bound)) throw BadCheck("bad bound '" + value + "'");
  std::size_t seen = 0;
  for (const Element& e : elements) {
    if (!selects(e, selector)) continue;
    ++seen;
    const auto it = e.attrs.find(attr);
    double x = 0;
    if (it == e.attrs.end()) throw CheckFailed("a <" + selector + "> has no " + attr);
    if (!parse_number(it->second, x)) {
      throw CheckFailed("a <" + selector + "> has " + attr + "='" + it->second +
                        "', not a finite number");
    }
    if (!compare(x, op, bound)) {
      throw CheckFailed("a <" + selector + "> has " + attr + "=" + it->second + ", expected " + op +
                        " " + value);
    }
  }
  if (seen == 0) throw CheckFailed("no <" + selector + "> element to check " + attr);
}

void check_svg_root(const std::vector<Element>& elements) {
  const Element& root = elements.front();
  if (root.name != "svg") throw CheckFailed("root element is <" + root.name + ">, not <svg>");
  const auto ns = root.attrs.find("xmlns");
  if (ns == root.attrs.end() || ns->second != "http://www.w3.org/2000/svg") {
    throw CheckFailed("<svg> lacks xmlns=\"http://www.w3.org/2000/svg\"");
  }
  for (const char* key : {"width", "height"}) {
    const auto it = root.attrs.find(key);
    double x = 0;
    if (it == root.attrs.end() || !parse_number(it->second, x) || x <= 0) {
      throw CheckFailed(std::string("<svg> has no positive ") + key);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: canzona_check_output FILE json|trace|svg [CHECK...]\n");
    return 2;
  }
  const std::string file = argv[1];
  const std::string kind = argv[2];
  if (kind != "json" && kind != "trace" && kind != "svg") {
    std::fprintf(stderr, "canzona_check_output: unknown kind '%s' (json, trace, svg)\n",
                 kind.c_str());
    return 2;
  }
  try {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw CheckFailed("cannot open (missing?)");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw CheckFailed("file is empty");
    int checks = 0;
    if (kind == "svg") {
      std::vector<Element> elements;
      try {
        elements = canzona::test_tools::read_xml(text);
      } catch (const canzona::test_tools::XmlError& e) {
        throw CheckFailed(e.what());
      }
      check_svg_root(elements);
      for (int i = 3; i < argc; ++i, ++checks) {
        try {
          check_svg(elements, argv[i]);
        } catch (const CheckFailed& e) {
          throw CheckFailed(std::string(argv[i]) + ": " + e.what());
        }
      }
    } else {
      json root;
      try {
        root = json::parse(text);
      } catch (const json::exception& e) {  // parse_error; out_of_range for 1e400
        throw CheckFailed(std::string("not valid JSON: ") + e.what());
      }
      if (kind == "trace") check_trace(root);
      for (int i = 3; i < argc; ++i, ++checks) {
        try {
          check_json(root, argv[i]);
        } catch (const CheckFailed& e) {
          throw CheckFailed(std::string(argv[i]) + ": " + e.what());
        }
      }
    }
    std::printf("%s: %d checks passed\n", file.c_str(), checks);
    return 0;
  } catch (const CheckFailed& e) {
    std::fprintf(stderr, "canzona_check_output: %s: %s\n", file.c_str(), e.what());
    return 1;
  } catch (const BadCheck& e) {
    std::fprintf(stderr, "canzona_check_output: bad check: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canzona_check_output: %s: %s\n", file.c_str(), e.what());
    return 1;
  }
}
