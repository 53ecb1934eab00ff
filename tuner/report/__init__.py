"""Reading a study back: trial records, trials.csv, reports (table/json/html) and the best-config export."""
