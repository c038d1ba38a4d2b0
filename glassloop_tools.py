"""Write your own glassloop tools.

    # ~/.config/glassloop/tools/shopping.py
    from glassloop_tools import store, tool

    shopping = store("shopping")

    @tool(side_effects=True)
    def add_item(name: str, quantity: int = 1) -> dict:
        \"\"\"Add an item to the shopping list.

        Args:
            name: what to buy
            quantity: how many
        \"\"\"
        return shopping.add({"name": name, "quantity": quantity})

This module is the stable surface for tool files; everything else in glassloop
may change between versions.
"""

from __future__ import annotations

from tools.cancel import Cancel
from tools.results import ToolError
from tools.user_api import DUE_CUE, NUMBER_CUE, Store, store, tool

__all__ = ["DUE_CUE", "NUMBER_CUE", "Cancel", "Store", "ToolError", "store", "tool"]
