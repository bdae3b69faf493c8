"""Agents replay knows how to run with their LLM pinned to what a recording says the model
answered (today: kimi-cli, through its offline `_scripted_echo` provider)."""
