"""SRAG: decomposition into sub-questions, triplet tables, and answers from the table."""
