"""Rendering: a `Summary` to markdown / JSON (`render_*`), HTML, and the shields.io badge;
no statistics (the numbers come from `docdelta.scorecard`). The one file it writes is the
HTML report beside the results (`html.write_html`), so its links stay relative to it."""

from docdelta.report.badge import badge
from docdelta.report.render import render_comment_markdown, render_json, render_markdown

__all__ = ["badge", "render_comment_markdown", "render_json", "render_markdown"]
