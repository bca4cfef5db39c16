//! The outbox's words, declared in the model crate (`workbench_model::delivery`) with the other
//! statuses; re-exported here, where the store types the rows it reads.

pub use workbench_model::delivery::{DeliveryKind, DeliveryStatus};
