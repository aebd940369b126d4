"""Programs copied into an interactive task's workspace (``code/play.py``): each plays the
task's train games for the agent, in process or through the train-environment service. They
run as the agent's own scripts, so each stands alone on what the workspace's venv has."""
