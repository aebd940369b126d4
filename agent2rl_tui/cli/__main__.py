"""``python -m agent2rl_tui.cli``: the ``agent2rl-tui`` command."""

from agent2rl_tui.cli import main

if __name__ == "__main__":
    main()
