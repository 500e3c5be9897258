"""What people read: the session report (document, sections, answer, figures, format, ops), the terminal
tables (console), the Chrome trace of per-op profiles and the regression gate's JUnit XML (junit)."""
