"""Paper systems: cards (data: one per paper row, plus user cards), the adapters that build
them, and the coverage of the papers' rows."""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "cards": ("SystemCard", "get_card", "load_cards"),
    "registry": ("MissingDependency", "SystemRetriever", "build_system", "system_status"),
})
