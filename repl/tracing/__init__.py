"""The JSONL trace of a session's events and raw calls, and reading it back: turns, the timeline,
the HTML page.
"""
