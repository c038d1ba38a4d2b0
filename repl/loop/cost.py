"""What model calls cost, and the per-session budget.

Prices are USD per million tokens: ``[pricing."MODEL"]`` in the config wins,
else the ``price_*`` keys of a profile whose model is that model; with neither
the cost is unknown and shown as such, never as $0. A profile's prices (and its
``context_window``) belong to the model the same layer names: a model chosen by
a later layer (``--model``, an environment variable, ``/model``, a user file
over the defaults) does not inherit them. A cost is summed per model call at the
price of the model that made it, so switching models mid-session keeps earlier
costs right.
"""

from __future__ import annotations

from dataclasses import dataclass

from repl.config.load import ModelPrice, ProviderSettings, Settings
from repl.loop.events import Usage


def price_for(settings: Settings, profile: ProviderSettings | None = None) -> ModelPrice | None:
    """The price of ``profile``'s model (default: the active one); None when unknown."""
    profile = profile or settings.active
    model = profile.model
    for name in (model, model.rsplit("/", 1)[-1]):  # "vendor/model" as routers spell it
        if name in settings.pricing:
            return settings.pricing[name]
    for owner in _owners(settings, profile, ("price_input", "price_output")):
        if owner.price_input or owner.price_output:
            return ModelPrice(owner.price_input, owner.price_cached_input or owner.price_input,
                              owner.price_output)
    return None


def price_of_model(settings: Settings, model: str) -> ModelPrice | None:
    """The price of ``model`` as the config knows it now: a profile naming it, else
    ``[pricing]``; None when unknown (a saved trace's calls priced when it is read back)."""
    profile = next((p for p in settings.providers.values() if p.model == model), None)
    if profile is not None:
        return price_for(settings, profile)
    return settings.pricing.get(model) or settings.pricing.get(model.rsplit("/", 1)[-1])


def context_window_for(settings: Settings, profile: ProviderSettings | None = None) -> int | None:
    """The context window of ``profile``'s model (default: the active one); None when unknown."""
    profile = profile or settings.active
    return next((p.context_window for p in _owners(settings, profile, ("context_window",))
                 if p.context_window), None)


def _owners(settings: Settings, profile: ProviderSettings, keys: tuple[str, ...]) -> list[ProviderSettings]:
    """The profiles (``profile`` first) whose ``keys`` describe ``profile``'s model: the
    profile names that model, and no later layer chose the model than set the keys."""
    return [other for other in [profile, *(p for p in settings.providers.values() if p.name != profile.name)]
            if other.model == profile.model and settings.of_its_model(other, keys)]


def usd(usage: Usage, price: ModelPrice | None) -> float | None:
    if price is None:
        return None
    fresh = max(0, usage.input_tokens - usage.cached_tokens)
    return (fresh * price.input + usage.cached_tokens * price.cached_input
            + usage.output_tokens * price.output) / 1_000_000


@dataclass(frozen=True)
class Cost:
    """A sum of model-call costs; ``unpriced`` counts calls whose price was unknown."""

    usd: float = 0.0
    unpriced: int = 0

    @classmethod
    def of(cls, usage: Usage, price: ModelPrice | None) -> Cost:
        value = usd(usage, price)
        return cls(0.0, 1) if value is None else cls(value, 0)

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.usd + other.usd, self.unpriced + other.unpriced)

    def text(self) -> str:
        if self.unpriced and not self.usd:
            return "cost unknown"
        shown = format_usd(self.usd)
        return f"{shown} + unknown" if self.unpriced else shown


def format_usd(value: float) -> str:
    return f"${value:.4f}" if value < 0.01 else f"${value:.2f}"


@dataclass(frozen=True)
class SessionBudget:
    """``[guards] session_budget_usd`` / ``session_budget_tokens`` against what was spent.

    Called by the agent loop before each model call with the turn's usage so
    far; returns why the turn must stop, or None.
    """

    max_usd: float
    max_tokens: int
    spent_tokens: int  # before this turn
    spent_usd: float
    price: ModelPrice | None

    def __call__(self, turn: Usage) -> str | None:
        tokens = self.spent_tokens + turn.total
        if self.max_tokens and tokens >= self.max_tokens:
            return (f"the session budget of {self.max_tokens:,} tokens is spent ({tokens:,} used); "
                    "raise [guards] session_budget_tokens or start a new session")
        spent = self.spent_usd + (usd(turn, self.price) or 0.0)
        if self.max_usd and self.price is not None and spent >= self.max_usd:
            return (f"the session budget of {format_usd(self.max_usd)} is spent ({format_usd(spent)} used); "
                    "raise [guards] session_budget_usd or start a new session")
        return None


def session_budget(settings: Settings, spent: Usage, cost: Cost) -> SessionBudget | None:
    """The budget check for the next turn, or None when no budget is set."""
    guards = settings.guards
    if not (guards.session_budget_usd or guards.session_budget_tokens):
        return None
    return SessionBudget(guards.session_budget_usd, guards.session_budget_tokens,
                         spent.total, cost.usd, price_for(settings))
