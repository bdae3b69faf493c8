"""`wire-ui`: a local, read-only web app over recordings (index, session view, frame inspector,
live sessions, replay divergences)."""
