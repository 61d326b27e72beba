"""Question sets, gold answers and the bundled sample. Imports the index and core layers only."""
