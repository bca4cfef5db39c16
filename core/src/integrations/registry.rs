//! The custom apps of every project as loaded integrations, with the stored app ids each project
//! was built from (so instances reload only projects whose apps changed), and the upstream MCP
//! servers each user signs in to, as integrations users connect. Filled by the app and
//! upstream services above; read by connections and the engine's wiring.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::Integration;

/// The apps of every project, as loaded integrations.
#[derive(Debug, Default)]
pub struct AppRegistry {
    projects: RwLock<HashMap<String, ProjectApps>>,
    /// Per project: its upstream MCP servers users sign in to.
    servers: RwLock<HashMap<String, Vec<Arc<Integration>>>>,
}

/// One project's loaded apps and the stored app ids they were built from (sorted; broken,
/// skipped ones included, so they are not reloaded again and again).
#[derive(Debug)]
struct ProjectApps {
    ids: Vec<String>,
    integrations: Vec<Arc<Integration>>,
    /// Apps that are stored but could not be loaded, by id, with why.
    failures: HashMap<String, String>,
}

impl AppRegistry {
    /// A project's app, or else its upstream server users sign in to, by name.
    pub fn get(&self, project_id: &str, name: &str) -> Option<Arc<Integration>> {
        let app = self
            .projects
            .read()
            .expect("app registry lock")
            .get(project_id)
            .and_then(|p| p.integrations.iter().find(|i| i.name() == name).cloned());
        app.or_else(|| {
            self.servers
                .read()
                .expect("app registry lock")
                .get(project_id)?
                .iter()
                .find(|i| i.name() == name)
                .cloned()
        })
    }

    /// A project's apps, then its upstream servers users sign in to.
    pub fn all(&self, project_id: &str) -> Vec<Arc<Integration>> {
        let mut all = self
            .projects
            .read()
            .expect("app registry lock")
            .get(project_id)
            .map(|p| p.integrations.clone())
            .unwrap_or_default();
        if let Some(s) = self
            .servers
            .read()
            .expect("app registry lock")
            .get(project_id)
        {
            all.extend(s.iter().cloned());
        }
        all
    }

    /// The project's upstream servers users sign in to, as integrations.
    pub fn set_servers(&self, project_id: &str, servers: Vec<Arc<Integration>>) {
        let mut map = self.servers.write().expect("app registry lock");
        if servers.is_empty() {
            map.remove(project_id);
        } else {
            map.insert(project_id.to_owned(), servers);
        }
    }

    /// The app ids each project was loaded from.
    pub fn loaded_ids(&self) -> HashMap<String, Vec<String>> {
        self.projects
            .read()
            .expect("app registry lock")
            .iter()
            .map(|(p, apps)| (p.clone(), apps.ids.clone()))
            .collect()
    }

    /// Why a stored app of the project is not loaded, if it is not.
    pub fn failure(&self, project_id: &str, app_id: &str) -> Option<String> {
        self.projects
            .read()
            .expect("app registry lock")
            .get(project_id)?
            .failures
            .get(app_id)
            .cloned()
    }

    pub fn set(
        &self,
        project_id: &str,
        ids: Vec<String>,
        integrations: Vec<Arc<Integration>>,
        failures: HashMap<String, String>,
    ) {
        let mut map = self.projects.write().expect("app registry lock");
        if ids.is_empty() {
            map.remove(project_id);
        } else {
            map.insert(
                project_id.to_owned(),
                ProjectApps {
                    ids,
                    integrations,
                    failures,
                },
            );
        }
    }
}
