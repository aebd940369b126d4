"""Running a run: create/start/stop it, the supervisor and what it starts (grader through
its launcher and client, revision watcher, agent process group, vitals sampler), agent
profiles, the workspace and the prompt, and the agents' transcript formats."""
