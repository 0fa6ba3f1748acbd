"""The Feast repo of the local stack (``feast -c features/repo``); ``local`` holds its settings-aware classes."""
