"""The terminal UI: Rich rendering, prompt_toolkit input and the approval dialog.

The only package that imports rich or prompt_toolkit; modules import them
lazily where start-up time matters (Markdown and Pygments load on first use).
"""
