"""The embedded model, which the hosted path never loads: its llama.cpp server as a child process
(``server.py``, the child's program ``llama_server.py``) and its weights (``weights.py``); how its
requests are worded (``dialect.py``): tool calls and results as text (``textcalls.py``, results
compact: ``compact.py``), the grammar of a reply (``grammar.py``); and its routers: a question's
tools chosen by the routers of ``chain.py``: a value of a parameter's example shape
(``shapes.py``), the tools' words (``words.py``, with ``gloss.py``), small talk and their meaning
(``router.py``), and a question of knowledge told from a request (``knowledge.py``)."""
