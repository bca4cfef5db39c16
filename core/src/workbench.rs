//! The services handle every surface holds: one database, one clock, and the domain services
//! built on them. Cheap to clone.

use std::sync::Arc;

use crate::auth::Accounts;
use crate::clock::{Clock, SystemClock};
use crate::store::Db;
use crate::Result;

#[derive(Clone)]
pub struct WorkbenchOptions {
    pub clock: Arc<dyn Clock>,
}

impl Default for WorkbenchOptions {
    fn default() -> Self {
        WorkbenchOptions { clock: Arc::new(SystemClock) }
    }
}

#[derive(Clone)]
pub struct Workbench {
    db: Db,
    clock: Arc<dyn Clock>,
    accounts: Accounts,
}

impl Workbench {
    /// Connects, migrates and assembles the services.
    pub async fn open(database_url: &str, options: WorkbenchOptions) -> Result<Workbench> {
        let db = Db::connect(database_url).await?;
        db.migrate().await?;
        Ok(Workbench::with_db(db, options))
    }

    pub fn with_db(db: Db, options: WorkbenchOptions) -> Workbench {
        let clock = options.clock;
        Workbench { accounts: Accounts::new(db.clone(), clock.clone()), db, clock }
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }
}
