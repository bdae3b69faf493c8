"""The replay engine, sans IO: events in (events.py), actions out (actions.py); the agent
replay's state machine is core.AgentEngine, driven by the runner in replay.driver."""

from .core import AgentEngine

__all__ = ["AgentEngine"]
