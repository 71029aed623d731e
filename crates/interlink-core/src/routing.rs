//! routing (in progress)
