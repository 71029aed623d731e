//! presence (in progress)
