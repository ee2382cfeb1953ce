// A strict reader of the XML that SVG files use, for canzona_check_output (check_output.cpp):
// enough to tell a well-formed file from a truncated or hand-mangled one and to look at its
// elements, not a general XML parser (no namespaces beyond names, no DTD processing).
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace canzona::test_tools {

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // the element's own character data, entities decoded
};

struct XmlError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Every element of `text` in document order (the root first). Accepts a prolog, comments,
// processing instructions, a DOCTYPE, CDATA, the five predefined entities and character
// references. Throws XmlError "not well-formed XML (line N): <what>" for anything else: no root,
// unbalanced or mismatched tags, unquoted or duplicate attributes, a bare '<' or '&', an unknown
// entity, or content after the root.
std::vector<Element> read_xml(const std::string& text);

}  // namespace canzona::test_tools
