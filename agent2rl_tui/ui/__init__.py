"""The Textual front end: one reader of run folders, never a writer of the record."""
