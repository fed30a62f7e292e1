"""Charts of a run: one chart model, drawn as SVG (inline in report.html, and as files)
and as PNG (for README files and PR comments).

    data (metrics.json, diagnoses) ──builders──▶ Chart ──layout──▶ primitives ─┬─▶ to_svg
                                                                               └─▶ to_png

Every chart is a list of horizontal bar rows (a row is one bar of stacked segments, or a
heading that starts a group). `layout` turns it into rectangles, lines and text in pixel
coordinates; the two back ends only draw those, so the SVG and the PNG show the same
picture: the PNG is `PNG_SCALE` times the SVG's width and height.

Text in SVG is escaped (it may come from corpus metadata); in the PNG it is drawn with
Pillow's bundled font, and each character that font lacks (CJK, Greek, Arabic…) with the
first of FALLBACK_FONTS that has it; the same fonts measure the text that lays out both.
"""

from __future__ import annotations

import html
import io
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import pandas as pd
from ragspan.tasks.core.taxonomy import COLORS as LABEL_COLORS
from ragspan.tasks.reporting.formatting import pct

WIDTH = 720
PNG_SCALE = 2
FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"
_PAD, _ROW, _BAR, _FONT = 16, 24, 16, 13
_MAX_LABEL_PX = 250


@dataclass(frozen=True)
class Segment:
    name: str
    value: float
    color: str


@dataclass(frozen=True)
class Row:
    label: str
    segments: tuple[Segment, ...] = ()
    note: str = ""  # printed right of the bar (a count, a rate)
    heading: bool = False  # a group title instead of a bar
    rule: bool = False  # draw a dashed line across (with heading: a marker such as a cutoff)


@dataclass(frozen=True)
class Chart:
    title: str
    rows: tuple[Row, ...]
    scale: Literal["count", "share"] = "count"  # share: every bar is 100% wide
    subtitle: str = ""
    legend: tuple[tuple[str, str], ...] = ()  # (name, color)
    width: int = WIDTH


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    tip: str = ""


@dataclass(frozen=True)
class Text:
    x: float
    y: float  # baseline
    text: str
    size: int = _FONT
    anchor: Literal["start", "end", "middle"] = "start"
    bold: bool = False
    color: str = "#222222"


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    color: str = "#999999"
    dash: bool = False


@dataclass
class Picture:
    width: int
    height: int
    title: str
    items: list[Rect | Text | Line] = field(default_factory=list)


# --------------------------------------------------------------------------- text


@lru_cache(maxsize=8)
def _font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


# Fonts for the characters Pillow's bundled font lacks (it is Latin only), tried in order;
# the first one that has a character's glyph draws it, in the PNG and when measuring text.
# RAGSPAN_CHART_FONTS (font paths separated by os.pathsep) comes first. scripts/install-fonts
# installs Droid Sans Fallback (CJK) on Debian; without any, such characters are boxes.
FALLBACK_FONTS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",  # Greek, Cyrillic, Hebrew, Arabic, symbols
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",  # CJK (fonts-droid-fallback)
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",  # CJK (fonts-noto-cjk)
    "/System/Library/Fonts/Supplemental/Arial Unicode.ttf",  # macOS
    "/System/Library/Fonts/PingFang.ttc",
    "C:/Windows/Fonts/msyh.ttc",
)
_DEFAULT = "(bundled)"


@lru_cache(maxsize=1)
def fallback_fonts() -> tuple[str, ...]:
    """The fallback font files present on this machine, in the order they are tried."""
    import os

    given = [p for p in os.environ.get("RAGSPAN_CHART_FONTS", "").split(os.pathsep) if p]
    return tuple(p for p in dict.fromkeys([*given, *FALLBACK_FONTS]) if os.path.isfile(p))


@lru_cache(maxsize=64)
def _font_at(key: str, size: int):
    from PIL import ImageFont

    return _font(size) if key == _DEFAULT else ImageFont.truetype(key, size)


def _mask(key: str, ch: str) -> tuple:
    from PIL import Image, ImageDraw

    font = _font_at(key, 24)
    img = Image.new("L", (64, 64), 0)
    ImageDraw.Draw(img).text((8, 48), ch, fill=255, font=font, anchor="ls")
    return font.getlength(ch), img.tobytes()


@lru_cache(maxsize=1 << 16)
def _covers(key: str, ch: str) -> bool:
    """Whether the font has a glyph for `ch`: its drawing differs from the font's
    missing-glyph box (U+10FFFD, a private-use code point no font here maps)."""
    return ch.isspace() or _mask(key, ch) != _mask(key, "\U0010FFFD")


def font_runs(text: str, size: int = _FONT) -> list[tuple[str, object]]:
    """`text` cut into runs, each with the font that draws it: the bundled font where it
    has the glyph, else the first fallback font that has it, else the bundled font (a box)."""
    keys = (_DEFAULT, *fallback_fonts())
    runs: list[list] = []
    for ch in text:
        key = next((k for k in keys if _covers(k, ch)), _DEFAULT)
        if runs and runs[-1][0] == key:
            runs[-1][1] += ch
        else:
            runs.append([key, ch])
    return [(chunk, _font_at(key, size)) for key, chunk in runs]


def text_width(text: str, size: int = _FONT) -> float:
    return float(sum(font.getlength(chunk) for chunk, font in font_runs(text, size)))


def clip(text: str, max_px: float, size: int = _FONT) -> str:
    """`text` cut with an ellipsis so that it fits in `max_px`."""
    if text_width(text, size) <= max_px:
        return text
    while text and text_width(text + "…", size) > max_px:
        text = text[:-1]
    return text + "…"


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xml_text(text: object) -> str:
    """Escaped for XML/HTML text and attributes; characters XML forbids are dropped."""
    return html.escape(_XML_BAD.sub("", str(text)), quote=True)


# --------------------------------------------------------------------------- layout


def layout(chart: Chart) -> Picture:
    pic = Picture(chart.width, 0, chart.title)
    y = _PAD + 16
    pic.items.append(Text(_PAD, y, clip(chart.title, chart.width - 2 * _PAD, 16), 16, bold=True))
    if chart.subtitle:
        y += 20
        pic.items.append(Text(_PAD, y, clip(chart.subtitle, chart.width - 2 * _PAD, 12), 12, color="#555555"))
    if chart.legend:
        y += 12
        x = _PAD
        for name, color in chart.legend:
            w = 14 + text_width(name, 12) + 14
            if x + w > chart.width - _PAD:
                x, y = _PAD, y + 18
            pic.items.append(Rect(x, y + 3, 10, 10, color))
            pic.items.append(Text(x + 14, y + 12, name, 12))
            x += w
        y += 18
    y += 8
    bars = [r for r in chart.rows if not r.heading]
    label_w = min(_MAX_LABEL_PX, max([text_width(r.label) for r in bars] + [40])) + 12
    note_w = max([text_width(r.note) for r in chart.rows] + [0]) + (12 if any(r.note for r in chart.rows) else 0)
    x0, x1 = _PAD + label_w, chart.width - _PAD - note_w
    top = y
    totals = [sum(s.value for s in r.segments) for r in bars]
    peak = max(totals + [0])
    for row in chart.rows:
        if row.heading:
            if row.rule:
                pic.items.append(Line(_PAD, y + _ROW / 2, chart.width - _PAD, y + _ROW / 2, "#555555", dash=True))
                label = clip(row.label, chart.width / 2)
                w = text_width(label, 12) + 8
                pic.items.append(Rect(x1 - w, y + 4, w, _ROW - 8, "#ffffff"))
                pic.items.append(Text(x1 - 4, y + _ROW / 2 + 4, label, 12, "end", color="#333333"))
            else:
                pic.items.append(Text(_PAD, y + _ROW - 6, clip(row.label, chart.width - 2 * _PAD), _FONT,
                                      bold=True))
            y += _ROW
            continue
        pic.items.append(Text(x0 - 8, y + _ROW / 2 + 4, clip(row.label, _MAX_LABEL_PX), _FONT, "end"))
        total = sum(s.value for s in row.segments)
        denom = total if chart.scale == "share" else peak
        x = x0
        for seg in row.segments:
            if seg.value <= 0 or denom <= 0:
                continue
            w = (x1 - x0) * seg.value / denom
            share = f" ({seg.value / total:.0%})" if total else ""
            pic.items.append(Rect(x, y + (_ROW - _BAR) / 2, w, _BAR, seg.color,
                                  f"{row.label} · {seg.name}: {_num(seg.value)}{share}"))
            x += w
        if row.note:
            pic.items.append(Text(chart.width - _PAD, y + _ROW / 2 + 4, row.note, _FONT, "end", color="#444444"))
        y += _ROW
    pic.items.insert(0, Line(x0, top, x0, y, "#bbbbbb"))
    pic.height = math.ceil(y + _PAD)
    return pic


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.3g}"


# --------------------------------------------------------------------------- back ends

# Characters the bundled PNG font lacks, drawn as their ASCII look-alikes.
_PNG_TEXT = str.maketrans({"—": "-", "–": "-", "−": "-", "…": "...", "×": "x"})


def to_svg(chart: Chart, standalone: bool = True) -> str:
    """SVG markup; `standalone` adds the XML declaration (for a .svg file)."""
    pic = layout(chart)
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{pic.width}" height="{pic.height}" '
            f'viewBox="0 0 {pic.width} {pic.height}" role="img" font-family="{xml_text(FONT_FAMILY)}">'),
           f"<title>{xml_text(pic.title)}</title>",
           f'<rect x="0" y="0" width="{pic.width}" height="{pic.height}" fill="#ffffff"/>']
    for it in pic.items:
        if isinstance(it, Rect):
            tip = f"<title>{xml_text(it.tip)}</title>" if it.tip else ""
            out.append(f'<rect x="{it.x:.1f}" y="{it.y:.1f}" width="{it.w:.1f}" height="{it.h:.1f}" '
                       f'fill="{it.fill}">{tip}</rect>')
        elif isinstance(it, Line):
            dash = ' stroke-dasharray="5 4"' if it.dash else ""
            out.append(f'<line x1="{it.x1:.1f}" y1="{it.y1:.1f}" x2="{it.x2:.1f}" y2="{it.y2:.1f}" '
                       f'stroke="{it.color}" stroke-width="1"{dash}/>')
        else:
            weight = ' font-weight="bold"' if it.bold else ""
            out.append(f'<text x="{it.x:.1f}" y="{it.y:.1f}" font-size="{it.size}" text-anchor="{it.anchor}" '
                       f'fill="{it.color}"{weight}>{xml_text(it.text)}</text>')
    out.append("</svg>")
    body = "\n".join(out)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n") if standalone else body


def to_png(chart: Chart, scale: int = PNG_SCALE) -> bytes:
    """PNG bytes, `scale` × the SVG's size."""
    from PIL import Image, ImageDraw

    pic = layout(chart)
    img = Image.new("RGB", (pic.width * scale, pic.height * scale), "#ffffff")
    draw = ImageDraw.Draw(img)
    s = scale
    for it in pic.items:
        if isinstance(it, Rect):
            # A bar thinner than one pixel is not drawn (PIL rejects x1 < x0).
            x0, y0 = it.x * s, it.y * s
            x1, y1 = (it.x + it.w) * s - 1, (it.y + it.h) * s - 1
            if x1 >= x0 and y1 >= y0:
                draw.rectangle([x0, y0, x1, y1], fill=it.fill)
        elif isinstance(it, Line):
            if it.dash:
                length = math.hypot(it.x2 - it.x1, it.y2 - it.y1)
                steps = max(1, int(length // 9))
                for k in range(steps):
                    a, b = k / steps, min(1.0, (k + 5 / 9) / steps)
                    draw.line([((it.x1 + (it.x2 - it.x1) * a) * s, (it.y1 + (it.y2 - it.y1) * a) * s),
                               ((it.x1 + (it.x2 - it.x1) * b) * s, (it.y1 + (it.y2 - it.y1) * b) * s)],
                              fill=it.color, width=s)
            else:
                draw.line([(it.x1 * s, it.y1 * s), (it.x2 * s, it.y2 * s)], fill=it.color, width=s)
        else:
            runs = font_runs(it.text.translate(_PNG_TEXT), it.size * s)
            width = sum(font.getlength(chunk) for chunk, font in runs)
            x = it.x * s - {"start": 0, "end": width, "middle": width / 2}[it.anchor]
            for chunk, font in runs:  # each run in its own font, left to right on one baseline
                draw.text((x, it.y * s), chunk, fill=it.color, font=font, anchor="ls")
                if it.bold:  # the bundled font has no bold face: overstrike
                    draw.text((x + 1, it.y * s), chunk, fill=it.color, font=font, anchor="ls")
                x += font.getlength(chunk)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


# --------------------------------------------------------------------------- builders


def _pct(rate: float | None) -> str:
    return pct(rate, missing="n/a")


def taxonomy_chart(metrics: dict) -> Chart:
    """One bar per label: its count, noted with its rate over judged claims."""
    rows = tuple(Row(label, (Segment(label, v["count"], LABEL_COLORS.get(label, "#999999")),),
                     f"{v['count']} · {_pct(v['rate'])}")
                 for label, v in metrics["labels"].items())
    return Chart(f"Claims by label ({metrics['run']})", rows, "count",
                 f"{metrics['claims']} claims, {metrics['judged']} judged; rates over judged claims")


def metadata_chart(metrics: dict, keys: list[str] | None = None, title: str = "") -> Chart:
    """100%-stacked bars of labels per metadata value, one group per key (`doc.doc_type`…)."""
    by = metrics.get("by_metadata") or {}
    keys = list(by) if keys is None else keys
    rows: list[Row] = []
    for key in keys:
        if len(keys) > 1:
            rows.append(Row(key, heading=True))
        for value, counts in by[key].items():
            n = sum(c["count"] for c in counts.values())
            segs = tuple(Segment(label, c["count"], LABEL_COLORS.get(label, "#999999"))
                         for label, c in counts.items())
            rows.append(Row(value, segs, f"n={n}"))
    legend = tuple((label, LABEL_COLORS.get(label, "#999999")) for label in metrics["labels"])
    if not rows:
        rows.append(Row("no metadata columns to group by", heading=True))
    title = title or (f"Labels by {keys[0]}" if len(keys) == 1 else "Labels by metadata")
    return Chart(title, tuple(rows), "share", "share of claims per value; n = claims", legend)


@dataclass(frozen=True)
class Position:
    """A bucket of the evidence-rank distribution."""

    key: str
    label: str
    count: int
    color: str


# In-context ranks deeper than this share one bar (a context window of 50 chunks would
# otherwise draw 50 bars).
MAX_RANK_BARS = 10


def evidence_positions(diagnoses: pd.DataFrame, retrieved: pd.DataFrame | None) -> list[Position]:
    """Where the supporting evidence of each claim sat. Inside the context window, one
    bucket per rank — rank 1 (the retriever's top chunk) down to the deepest cutoff of any
    question, empty ranks included, so the window shows whole; then evidence retrieved but
    cut off, by how many ranks below its question's cutoff (offset = rank − cutoff > 0);
    then `corpus` (found only by the corpus-wide search) and `none` (no supporting
    evidence: synthesis_error, hallucination). `unjudged` claims are left out.

    The cutoff of a question is its last in-context rank (from `retrieved`); without
    `retrieved`, the in_context flag of the deciding evidence alone places the claim."""
    cutoff: dict[str, int] = {}
    if retrieved is not None and len(retrieved):
        ctx = retrieved[retrieved["in_context"].astype(bool)]
        cutoff = {str(q): int(r) for q, r in ctx.groupby("question_id")["rank"].max().items()}
    judged = diagnoses[diagnoses["label"] != "unjudged"]
    label = judged["label"]
    ranked = label.isin(("correct", "rank_failure")) & judged["rank"].notna()
    rank = judged.loc[ranked, "rank"].astype("int64")
    k = judged.loc[ranked, "question_id"].astype(str).map(cutoff)
    # no retrieved table for the question: only in/out of context is known
    fallback = rank.where(label[ranked] == "correct", rank - 1)
    off = rank - k.fillna(fallback).astype("int64")
    inside = rank[off <= 0].value_counts().to_dict()
    below = off[off > 0].value_counts().to_dict()
    deepest = max([*cutoff.values(), *inside, 1])
    out = []
    for r in range(1, min(deepest, MAX_RANK_BARS) + 1):
        out.append(Position(f"rank{r}", f"rank {r} (in context)", int(inside.get(r, 0)), LABEL_COLORS["correct"]))
    if deepest > MAX_RANK_BARS:
        n = sum(c for r, c in inside.items() if r > MAX_RANK_BARS)
        out.append(Position(f"rank{MAX_RANK_BARS + 1}+", f"ranks {MAX_RANK_BARS + 1}–{deepest} (in context)",
                            int(n), LABEL_COLORS["correct"]))
    for o in sorted(below):
        out.append(Position(f"offset+{o}", f"{o} rank{'s' if o > 1 else ''} below cutoff", int(below[o]),
                            LABEL_COLORS["rank_failure"]))
    corpus = int((label[~ranked] == "retrieval_miss").sum())
    none = int((~ranked).sum()) - corpus
    out.append(Position("corpus", "not retrieved (corpus search)", corpus, LABEL_COLORS["retrieval_miss"]))
    out.append(Position("none", "no supporting evidence", none, "#9e9e9e"))
    return out


def rank_chart(positions: list[Position], run: str = "") -> Chart:
    rows: list[Row] = []
    total = sum(p.count for p in positions)
    ruled = False
    for p in positions:
        if not ruled and not p.key.startswith("rank"):
            rows.append(Row("context cutoff", heading=True, rule=True))
            ruled = True
        note = f"{p.count}" + (f" · {p.count / total:.0%}" if total else "")
        rows.append(Row(p.label, (Segment(p.label, p.count, p.color),), note))
    title = "Rank of the supporting evidence, relative to the context cutoff" + (f" ({run})" if run else "")
    return Chart(title, tuple(rows), "count", "above the line: the rank the model saw it at; "
                 "below: ranks past the question's cutoff, evidence the model never saw")
