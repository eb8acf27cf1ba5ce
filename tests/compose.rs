//! The production-like compose stack and its image: filled in by the deploy work.
