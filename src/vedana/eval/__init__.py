"""`vedana eval`: answer quality on a golden set — golden sets, scoring, runs, reports."""
