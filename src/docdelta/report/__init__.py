"""The scorecard: numbers (`summarize`), markdown/JSON (`render_*`) and the shields.io badge."""

from docdelta.report.badge import badge
from docdelta.report.render import render_comment_markdown, render_json, render_markdown
from docdelta.report.summary import summarize

__all__ = ["badge", "render_comment_markdown", "render_json", "render_markdown", "summarize"]
