"""Two user tools for the embedded model's evaluation (local_dev.toml, local_heldout.toml):
written as a user writes them (docs/TOOLS.md, "Write your own tool"), with a docstring and no examples,
so the model's advice comes from each tool's own description."""

from __future__ import annotations

from glassloop_tools import ToolError, store, tool

shopping = store("eval_shopping")
# fixed rates, units of each currency per US dollar: the evaluation needs no network
RATES = {"USD": 1.0, "EUR": 0.92, "CNY": 7.2, "GBP": 0.79, "JPY": 150.0}


def preview_add(name: str, quantity: int = 1) -> dict:
    return {"before": None, "after": {"name": name, "quantity": quantity}}


@tool(side_effects=True, preview=preview_add)
def add_item(name: str, quantity: int = 1) -> dict:
    """Put something on the shopping list of things to buy.

    Args:
        name: what to buy
        quantity: how many
    """
    if quantity < 1:
        raise ValueError("quantity must be at least 1")
    return shopping.add({"name": name, "quantity": quantity})


@tool
def convert_currency(amount: float, source: str, target: str) -> dict:
    """Convert an amount of money from one currency to another at today's exchange rate.

    Args:
        amount: how much money
        source: the currency it is in, a code like "USD"
        target: the currency wanted, a code like "EUR"
    """
    rates = {code: RATES.get(code.strip().upper()) for code in (source, target)}
    missing = [code for code, rate in rates.items() if rate is None]
    if missing:
        raise ToolError("not_found", f"no rate for {', '.join(missing)}; known: {', '.join(RATES)}")
    value = amount / rates[source] * rates[target]  # type: ignore[operator]
    return {"amount": amount, "source": source.upper(), "target": target.upper(), "value": round(value, 2)}
