//! bursar gateway
