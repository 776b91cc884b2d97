"""Paper systems: cards (data: one per paper row, plus user cards), the adapters that build
them, and the coverage of the papers' rows."""

from instir.systems.cards import SystemCard, get_card, load_cards
from instir.systems.registry import (
           MissingDependency,
           SystemRetriever,
           build_system,
           system_status,
)

__all__ = ["MissingDependency", "SystemCard", "SystemRetriever", "build_system", "get_card", "load_cards",
           "system_status"]
