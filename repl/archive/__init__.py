"""What a session leaves behind and how it is read back: the journal (journal.py), what a
resume shows before its session is built (recap.py), the search index beside the journals
(search.py) and the numbers a person types to name a turn, a branch or a count (typed_numbers.py).
Nothing here imports the live session (repl/session/), which writes and reads through it.
"""
