//! API tests: the real application on port 0, every test on SQLite and on PostgreSQL.

mod helpers;

mod api_keys;
mod cli;
mod health;
mod members;
mod portal_auth;
mod scale_out;
mod v1_auth;
