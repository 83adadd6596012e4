"""A posted comment as a reader sees it on GitHub: its markdown rendered to HTML the way GitHub
renders a comment (CommonMark plus GFM tables and strikethrough, raw HTML such as `<details>`
passed through, so folds start collapsed), styled like GitHub's comment box at its width,
drawn by a real headless Chromium (Debian's package, driven by Playwright).

The stylesheet is a FAKE of GitHub's: the few rules that decide what a reader sees unfolded
and how tall it is (font, line height, heading size, table cells, the fold's marker); GitHub's
own CSS cannot be fetched at test time.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from playwright.sync_api import sync_playwright

COMMENT_WIDTH = 920
"""The pixel width of a PR comment's body on GitHub at a common desktop window."""

GITHUB_LIKE_CSS = """
body { margin: 0; background: #fff; }
.markdown-body { box-sizing: border-box; width: WIDTHpx; padding: 16px; color: #1f2328;
  font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
.markdown-body h2 { font-size: 1.5em; font-weight: 600; margin: 0 0 16px; padding-bottom: .3em;
  border-bottom: 1px solid #d1d9e0; }
.markdown-body p, .markdown-body ul, .markdown-body table, .markdown-body details { margin: 0 0 16px; }
.markdown-body ul { padding-left: 2em; }
.markdown-body table { border-collapse: collapse; display: block; overflow: auto; }
.markdown-body th, .markdown-body td { border: 1px solid #d1d9e0; padding: 6px 13px; }
.markdown-body tr:nth-child(2n) { background: #f6f8fa; }
.markdown-body code { font: 85% ui-monospace, SFMono-Regular, Menlo, monospace; padding: .2em .4em;
  background: #eff1f3; border-radius: 6px; }
.markdown-body summary { cursor: pointer; }
.markdown-body a { color: #0969da; text-decoration: none; }
""".replace("WIDTH", str(COMMENT_WIDTH))

_GITHUB_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def comment_html(markdown: str) -> str:
    """The comment's markdown as a page shaped like GitHub's comment box."""
    body = _GITHUB_MARKDOWN.render(markdown)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{GITHUB_LIKE_CSS}</style></head>"
        f"<body><div class='markdown-body'>{body}</div></body></html>"
    )


@dataclass(frozen=True)
class Seen:
    """What the collapsed comment shows: its rendered text (closed folds show only their
    summary line) and its height in pixels."""

    text: str
    height: int


def look(markdown: str, out: Path) -> Seen:
    """Render `markdown` collapsed, as GitHub first shows it; the screenshot goes to `out` (PNG)."""
    page_file = out.with_suffix(".html")
    page_file.write_text(comment_html(markdown), encoding="utf-8")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": COMMENT_WIDTH, "height": 600})
            page.goto(page_file.as_uri())
            box = page.locator(".markdown-body")
            box.screenshot(path=str(out))
            text = box.inner_text()  # innerText leaves out what a closed <details> does not draw
            height = int(page.evaluate("document.querySelector('.markdown-body').offsetHeight"))
        finally:
            browser.close()
    return Seen(text, height)
