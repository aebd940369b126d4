"""What is derived from run folders for a reader: the run index and run view, the report
(markdown, JSON, HTML), iterations and the narrative, statistics and significance, compare,
scaling and campaign tables, charts, the step list, item and episode rows, diffs, a run's
tokens and cost. Reads the record; never writes a submission, a revision or a step."""
