//! bring-up
