"""The vocabulary every stage shares: typed errors, the device profile (config), run records, the conditions
under which runs may be pooled, and the metric registry. Stdlib and python-dotenv only; imports no other folder."""
