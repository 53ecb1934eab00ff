"""Reading a study back: trial records, trials.csv, reports (table/json/html) and the best-config export."""

__all__ = ["export", "export_file", "horizon", "html", "plots", "settings", "verify", "view"]  # its modules, each imported by name (heavy imports inside)
