"""The run report: a self-contained HTML page and PNG plots drawn from the log's projection.

One entry point, :func:`write_report`; the numbers come from
``store.projections.run_report`` only, the drawing is here.
"""

from runtime.report.writer import ReportResult, write_report

__all__ = ["ReportResult", "write_report"]
