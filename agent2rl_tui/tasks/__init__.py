"""What a task is: definitions from tasks/<name>/task.toml, the data cache, model files,
answer rules, and the tiny offline model. Knows nothing of runs or processes."""
