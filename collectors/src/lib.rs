//! bursar collectors
