"""The embedded model's routers, which the hosted path never loads: a question's tools chosen
by the tools' words (``words.py``), then, where none is found, by their meaning (``router.py``)."""
