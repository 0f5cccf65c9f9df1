"""Operations: `run` (lock + sync + index, for cron), `check` (connectivity, data-model lint,
consistency, smoke), and `status` (the run log and what the knowledge base holds)."""
