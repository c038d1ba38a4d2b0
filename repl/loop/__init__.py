"""The agent loop and its data: the runner, the conversation and its window, events, approval and
step mode, prompts, compaction, cost. No I/O: it emits events and asks injected hooks.
"""
