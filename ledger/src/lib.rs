//! bursar ledger
