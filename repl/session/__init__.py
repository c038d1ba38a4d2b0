"""The live session around the loop: the core every door builds on, the parts built from settings,
what a person brings (instructions, templates, mentions, hooks, tools, shell commands) and the
doors: the REPL (its start and slash commands) and `glassloop ask`. What a session leaves behind
is in repl/archive/; models put on trial with its questions in repl/trials/.
"""
