"""What people read: the session report (document, sections, answer, figures, format, ops), the terminal
tables (console) and the Chrome trace of per-op profiles."""
