// XML well-formedness for canzona_check_output (xml_reader.h).
#include "xml_reader.h"

#include <cctype>
#include <cstring>

namespace canzona::test_tools {

namespace {

// A strict reader of the XML subset SVG files use: prolog, comments, DOCTYPE, elements,
// attributes, character data, the five predefined entities and character references.
class XmlReader {
 public:
  explicit XmlReader(const std::string& text) : s_(text) {}

  std::vector<Element> read() {
    misc();
    if (pos_ >= s_.size() || s_[pos_] != '<') fail("no root element");
    element();
    misc();
    if (pos_ != s_.size()) fail("content after the root element </" + elements_[0].name + ">");
    return std::move(elements_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::size_t line = 1;
    for (std::size_t i = 0; i < pos_ && i < s_.size(); ++i) line += s_[i] == '\n';
    throw XmlError("not well-formed XML (line " + std::to_string(line) + "): " + what);
  }

  bool starts(const char* prefix) const {
    return s_.compare(pos_, std::strlen(prefix), prefix) == 0;
  }

  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }

  void skip_past(const char* end, const char* what) {
    const std::size_t at = s_.find(end, pos_);
    if (at == std::string::npos) fail(std::string("unterminated ") + what);
    pos_ = at + std::strlen(end);
  }

  // Whitespace, comments, processing instructions and a DOCTYPE outside the root.
  void misc() {
    while (true) {
      skip_space();
      if (starts("<!--")) {
        skip_past("-->", "comment");
      } else if (starts("<?")) {
        skip_past("?>", "processing instruction");
      } else if (starts("<!DOCTYPE")) {
        skip_past(">", "DOCTYPE");
      } else {
        return;
      }
    }
  }

  std::string name() {
    const std::size_t begin = pos_;
    auto ok = [&](char c, bool first) {
      return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
             (!first && (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.'));
    };
    while (pos_ < s_.size() && ok(s_[pos_], pos_ == begin)) ++pos_;
    if (pos_ == begin) fail("expected a name");
    return s_.substr(begin, pos_ - begin);
  }

  // Character data up to `stop`, entities decoded; a bare '<' or '&' is an error.
  std::string chars(char stop) {
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != stop) {
      const char c = s_[pos_];
      if (c == '<') fail("'<' inside an attribute value");
      if (c != '&') {
        out += c;
        ++pos_;
        continue;
      }
      const std::size_t semi = s_.find(';', pos_);
      if (semi == std::string::npos || semi - pos_ > 10) fail("bare '&'");
      const std::string entity = s_.substr(pos_ + 1, semi - pos_ - 1);
      static const std::map<std::string, char> kNamed = {
          {"lt", '<'}, {"gt", '>'}, {"amp", '&'}, {"quot", '"'}, {"apos", '\''}};
      if (kNamed.count(entity)) {
        out += kNamed.at(entity);
      } else if (entity.size() > 1 && entity[0] == '#') {
        out += '?';  // a character reference; its code point does not matter to the checks
      } else {
        fail("unknown entity &" + entity + ";");
      }
      pos_ = semi + 1;
    }
    return out;
  }

  void element() {
    ++pos_;  // '<'
    Element e;
    e.name = name();
    const std::size_t index = elements_.size();
    while (true) {
      const std::size_t before = pos_;
      skip_space();
      if (pos_ >= s_.size()) fail("unterminated start tag <" + e.name);
      if (s_[pos_] == '>' || starts("/>")) break;
      if (pos_ == before) fail("expected whitespace before an attribute of <" + e.name + ">");
      const std::string attr = name();
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '=') fail("attribute " + attr + " has no '='");
      ++pos_;
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) {
        fail("attribute " + attr + " of <" + e.name + "> is not quoted");
      }
      const char quote = s_[pos_++];
      std::string value = chars(quote);
      if (pos_ >= s_.size()) fail("unterminated attribute " + attr);
      ++pos_;
      if (!e.attrs.emplace(attr, value).second) fail("duplicate attribute " + attr);
    }
    elements_.push_back(e);
    if (starts("/>")) {
      pos_ += 2;
      return;
    }
    ++pos_;  // '>'
    while (true) {
      if (pos_ >= s_.size()) fail("<" + e.name + "> is never closed");
      if (starts("<!--")) {
        skip_past("-->", "comment");
      } else if (starts("<![CDATA[")) {
        const std::size_t begin = pos_ + 9;
        skip_past("]]>", "CDATA section");
        elements_[index].text += s_.substr(begin, pos_ - 3 - begin);
      } else if (starts("</")) {
        pos_ += 2;
        const std::string closing = name();
        skip_space();
        if (closing != e.name) fail("</" + closing + "> closes <" + e.name + ">");
        if (pos_ >= s_.size() || s_[pos_] != '>') fail("unterminated end tag </" + closing);
        ++pos_;
        return;
      } else if (s_[pos_] == '<') {
        element();
      } else {
        const std::size_t lt = s_.find('<', pos_);
        const std::string raw = s_.substr(pos_, lt == std::string::npos ? lt : lt - pos_);
        XmlReader sub(raw);
        elements_[index].text += sub.chars('\0');
        pos_ = lt == std::string::npos ? s_.size() : lt;
      }
    }
  }

  const std::string& s_;
  std::size_t pos_ = 0;
  std::vector<Element> elements_;
};

}  // namespace

std::vector<Element> read_xml(const std::string& text) {
  return XmlReader(text).read();
}

}  // namespace canzona::test_tools
