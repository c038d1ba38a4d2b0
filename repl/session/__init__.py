"""A session around the loop: the REPL's start, the interactive chat and its slash commands, the
journal, building the parts from settings, `glassloop ask`, /compare, user tools and shell
commands.
"""
