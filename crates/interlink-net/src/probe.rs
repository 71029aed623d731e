//! Sessionless probing of a node (see `probe`).
