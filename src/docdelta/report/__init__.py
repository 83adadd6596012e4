"""Rendering only: a `Summary` to markdown / JSON (`render_*`), HTML, and the shields.io
badge; no statistics and no I/O (the numbers come from `docdelta.scorecard`)."""

from docdelta.report.badge import badge
from docdelta.report.render import render_comment_markdown, render_json, render_markdown

__all__ = ["badge", "render_comment_markdown", "render_json", "render_markdown"]
