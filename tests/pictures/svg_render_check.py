#!/usr/bin/python3
"""Checks the project's SVG pictures as pictures, with Debian's rsvg-convert (librsvg2-bin).

Usage: svg_render_check.py RSVG_CONVERT WORKDIR FILE.svg...

For each FILE:
  renders   rsvg-convert turns it into a PNG whose size (the IHDR chunk) is the SVG's width x
            height.
  inside    nothing is drawn outside the canvas, and no text element reaches outside it: the
            picture's elements (then its text elements alone) are drawn into a canvas with a
            40 px margin, the original canvas area is painted white over them, and the PNG must
            equal that of the empty margin canvas byte for byte (rsvg-convert encodes equal
            pixels equally). On a difference each text element is rendered alone, so the message
            names the one that sticks out.
  units     every value axis's label (class "y-label") names a unit: seconds "(s)", a loss in
            "(nats/token)", FLOP (kFLOP ... PFLOP) or bytes (B, KiB ... TiB).

Prints one "ok ..." line per check and exits 0, or prints "FAIL: ..." lines and exits 1. Only the
standard library: it runs under Debian's /usr/bin/python3.
"""
import copy
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

SVG_NS = "http://www.w3.org/2000/svg"
MARGIN = 40
UNIT = re.compile(r"\((s|nats/token)\)|^([kMGTP]?FLOP|B|KiB|MiB|GiB|TiB)$")

ET.register_namespace("", SVG_NS)


def tag(element):
    return element.tag.split("}")[-1]


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def render(rsvg, svg_path, png_path):
    result = subprocess.run([rsvg, "-o", png_path, svg_path], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"rsvg-convert failed on {svg_path}: {result.stderr.strip()}")


def wrapped(children, width, height, cover=True):
    """A canvas MARGIN px larger on each side holding `children` at the original origin, with the
    original canvas painted white over them."""
    root = ET.Element(f"{{{SVG_NS}}}svg", {
        "version": "1.1", "width": str(width + 2 * MARGIN), "height": str(height + 2 * MARGIN),
        "font-family": "sans-serif", "font-size": "11"})
    ET.SubElement(root, f"{{{SVG_NS}}}rect", {"width": "100%", "height": "100%", "fill": "white"})
    group = ET.SubElement(root, f"{{{SVG_NS}}}g", {"transform": f"translate({MARGIN},{MARGIN})"})
    for child in children:
        group.append(copy.deepcopy(child))
    if cover:
        ET.SubElement(root, f"{{{SVG_NS}}}rect", {
            "x": str(MARGIN), "y": str(MARGIN), "width": str(width), "height": str(height),
            "fill": "white"})
    return ET.ElementTree(root)


def text_only(element):
    """A copy of `element` keeping only text elements and the groups around them."""
    kept = copy.copy(element)
    kept[:] = []
    for child in element:
        if tag(child) == "text":
            kept.append(copy.deepcopy(child))
        elif tag(child) == "g":
            sub = text_only(child)
            if len(sub):
                kept.append(sub)
    return kept


def texts(element):
    return [e for e in element.iter() if tag(e) == "text"]


def text_of(element):
    return "".join(element.itertext())


class Checker:
    def __init__(self, rsvg, work):
        self.rsvg, self.work, self.failures, self.n = rsvg, work, [], 0

    def png_of(self, tree, name):
        self.n += 1
        svg_path = f"{self.work}/{name}-{self.n}.svg"
        png_path = svg_path[:-4] + ".png"
        tree.write(svg_path, xml_declaration=False)
        render(self.rsvg, svg_path, png_path)
        with open(png_path, "rb") as f:
            return f.read()

    def check(self, path):
        name = path.rsplit("/", 1)[-1]
        root = ET.parse(path).getroot()
        width, height = (int(float(root.get(k))) for k in ("width", "height"))
        png = f"{self.work}/{name}.png"
        render(self.rsvg, path, png)
        if png_size(png) != (width, height):
            self.failures.append(f"{name}: renders at {png_size(png)}, not {width} x {height}")
        else:
            print(f"ok {name}: renders at {width} x {height}")

        blank = self.png_of(wrapped([], width, height), name)
        if self.png_of(wrapped(list(root), width, height), name) == blank:
            print(f"ok {name}: nothing drawn outside the canvas")
        else:
            self.failures.append(f"{name}: something is drawn outside the {width} x {height} canvas")
        only_text = text_only(root)
        if self.png_of(wrapped(list(only_text), width, height), name) == blank:
            print(f"ok {name}: all {len(texts(root))} text elements inside the canvas")
        else:
            culprits = []
            for t in texts(root):
                if self.png_of(wrapped([t], width, height), name) != blank:
                    culprits.append(repr(text_of(t)))
            where = ", ".join(culprits) if culprits else "one inside a transformed group"
            self.failures.append(f"{name}: text outside the canvas: {where}")

        labels = [text_of(t) for t in texts(root) if "y-label" in (t.get("class") or "").split()]
        if not labels:
            self.failures.append(f"{name}: no value axis label (class y-label)")
        for label in labels:
            if UNIT.search(label):
                print(f"ok {name}: axis '{label}' names its unit")
            else:
                self.failures.append(f"{name}: axis label '{label}' names no unit")


def main():
    if len(sys.argv) < 4:
        print("usage: svg_render_check.py RSVG_CONVERT WORKDIR FILE.svg...", file=sys.stderr)
        return 2
    checker = Checker(sys.argv[1], sys.argv[2])
    for path in sys.argv[3:]:
        try:
            checker.check(path)
        except (RuntimeError, ValueError, ET.ParseError, OSError) as e:
            checker.failures.append(f"{path}: {e}")
    for f in checker.failures:
        print(f"FAIL: {f}")
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
