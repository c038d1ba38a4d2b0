"""Settings, declared once, and where their values come from: the layered TOML, environment and
flags, the schema and checks, `glassloop config`, workspace trust, redaction of the secrets they
hold.
"""
