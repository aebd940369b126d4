"""Scripted agents shipped with the package (the example SFT+GRPO agent)."""
