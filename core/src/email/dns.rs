//! TXT lookups for domain verification, through the system's resolver or one the operator names
//! (`--dns-resolver`, which tests point at a local responder). A fresh resolver per lookup: a
//! record just published must not hide behind a cached "no such name".

use std::net::SocketAddr;
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::Resolver;

/// Why a lookup answered nothing usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// The name has no TXT records (or does not exist).
    NoRecords,
    /// The resolver could not answer (timeout, server failure, no configuration).
    Failed(String),
}

/// Which DNS server answers verification lookups.
#[derive(Debug, Clone, Default)]
pub struct TxtResolver {
    server: Option<SocketAddr>,
}

impl TxtResolver {
    /// `None`: the system's configuration (`/etc/resolv.conf`).
    pub fn new(server: Option<SocketAddr>) -> TxtResolver {
        TxtResolver { server }
    }

    /// Every TXT record at `name`, each record's strings joined (long values are split into
    /// 255-byte strings on the wire).
    pub async fn txt(&self, name: &str) -> Result<Vec<String>, LookupError> {
        let mut opts = ResolverOpts::default();
        opts.timeout = Duration::from_secs(3);
        opts.attempts = 2;
        opts.cache_size = 0;
        let builder = match self.server {
            Some(addr) => {
                let mut ns = NameServerConfig::udp_and_tcp(addr.ip());
                for c in &mut ns.connections {
                    c.port = addr.port();
                }
                Resolver::builder_with_config(
                    ResolverConfig::from_name_servers(vec![ns]),
                    TokioRuntimeProvider::default(),
                )
            }
            None => Resolver::builder_tokio()
                .map_err(|e| LookupError::Failed(format!("no DNS configuration: {e}")))?,
        };
        let resolver = builder
            .with_options(opts)
            .build()
            .map_err(|e| LookupError::Failed(e.to_string()))?;
        let fqdn = format!("{}.", name.trim_end_matches('.'));
        match resolver.txt_lookup(fqdn.as_str()).await {
            Ok(lookup) => {
                let values: Vec<String> = lookup
                    .answers()
                    .iter()
                    .filter_map(|r| match &r.data {
                        RData::TXT(txt) => Some(
                            txt.txt_data
                                .iter()
                                .map(|s| String::from_utf8_lossy(s))
                                .collect::<String>(),
                        ),
                        _ => None,
                    })
                    .collect();
                if values.is_empty() {
                    Err(LookupError::NoRecords)
                } else {
                    Ok(values)
                }
            }
            Err(e) if e.is_no_records_found() || e.is_nx_domain() => Err(LookupError::NoRecords),
            Err(e) => Err(LookupError::Failed(e.to_string())),
        }
    }
}
