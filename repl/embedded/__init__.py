"""The embedded model's own parts that the hosted path never loads: the router that chooses a
question's tools by meaning (``router.py``)."""
