"""Models on trial: questions run again as dry runs on a model of your choice and what it did set
beside another run. ``/compare`` (compare.py: the last question on other models, and the dry-run
pieces the others share), ``glassloop replay`` (replay.py: a saved session's questions) and
``glassloop eval`` (evaluate.py: case files). Each run is a session core (repl/session/core.py)
in dry run; nothing here imports a door or a command of the session.
"""
