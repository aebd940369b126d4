"""The driver-LLM wire layer: the four HTTP APIs the agent CLIs speak to their model.

Claude Code speaks Anthropic Messages, Codex OpenAI Responses, OpenCode and OpenHands OpenAI
Chat Completions, Gemini CLI the Gemini API. `protocols` knows each format in one place (how a
request is recognised and read, how a reply is framed, how the usage of a real reply is read as
it passes); `scripted` is a local server that speaks all four and replays a script, for tests
and for `agents check`. The metering proxy reuses `protocols` to read what real APIs bill.

Standard library only: this layer sits below `run` and above `grader` (docs/architecture.md).
"""
