"""Analysis of recorded sessions: SQL views over the store, and the wire-show / wire-stats /
wire-query / wire-import / wire-export commands built on them."""
