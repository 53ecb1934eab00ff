"""Reading a study back: trial records, trials.csv, reports (table/json/html) and the best-config export."""

__all__ = ["export", "horizon", "html", "plots", "view"]  # its modules, each imported by name (heavy imports inside)
