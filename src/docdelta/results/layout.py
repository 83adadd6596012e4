"""Every file name docdelta writes in a workdir (and in an external trials folder), named once:
the store, the scorecard, grading, the tools and the entry rooms all take them from here."""

# ------------------------------------------------------------ the workdir
MANIFEST_FILE = "manifest.json"
DETECTION_FILE = "detection.json"
LOCK_FILE = ".lock"
CHECKOUTS = "checkouts"
"""The sealed checkouts' directory in a workdir."""
POOLED_FILE = "pooled.json"
"""The earlier base runs the run pooled, so a report decides alike."""
POWER_CACHE = "power.json"
"""Where `scorecard.power.cached_drop` keeps its simulations."""
ABLATION_FILE = "ablation.json"
ON_BASE = "on-base"
"""The workdir, inside a PR's, of its evaluation on base's code when its own code gave no
verdict (`evaluation.evaluate`)."""
REPORT_FILE = "report.html"
"""The HTML report, written beside the results it links to."""
SUITE_FILE = "suite.json"
"""`docdelta run --repos`: every repository's verdict and the pooled one, beside their workdirs."""
SUGGESTED_PATCH = "suggested.patch"
"""`docdelta suggest`'s and the Action's deterministic patch."""

# --------------------------------------------------------- beside each run
RESULT_FILE = "result.json"
TRANSCRIPT_FILE = "transcript.txt"
"""What the agent printed, beside its result."""
DIFF_FILE = "diff.patch"
"""A change task's diff of the agent's edits, beside its result."""
JUDGED_FILE = "judged.json"

# ------------------------------------------------- an external trials folder
TRIALS_INDEX = "trials.json"
TRIAL_FILE = "trial.json"
ANSWER_FILE = "answer.txt"
STATUS_FILE = "status.json"
PROMPT_FILE = "prompt.md"
