//! Test modules and the shared harness.
mod bad_input;
mod common;
mod connect;
mod direct;
mod errors;
mod exchanges;
mod fake_adbd;
mod faults;
mod flows;
mod leases;
mod offline;
mod portal;
mod secrets;
mod secrets_kept;
mod settle;
mod sims;
mod unicode;
