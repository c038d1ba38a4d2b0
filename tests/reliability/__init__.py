"""The reliability and security suite: interrupts, history fuzzing, crash safety,
hostile arguments, transport faults, injection, bad inputs and a soak run.

Stress parts run reduced counts by default; ``GLASSLOOP_RELIABILITY_FULL=1``
selects the full counts. With ``GLASSLOOP_RELIABILITY_REPORT=FILE`` every part
appends its measured figures to FILE as JSON lines (see ``helpers.record``).
"""
