//! The store as the web view's data source: `kansoku web --store URL`.

use std::sync::Arc;

use aguri::source::{Bucketed, Catalog, DataSource, LevelInfo, SourceError};
use aguri::Summary;

use crate::client::Client;
use crate::schema;

/// Summaries of many probes in ClickHouse.
pub struct StoreSource {
    client: Client,
}

impl StoreSource {
    /// Checks the store answers with this kansoku's schema.
    pub fn open(client: Client) -> Result<StoreSource, crate::StoreError> {
        schema::check(&client)?;
        Ok(StoreSource { client })
    }
}

fn err(e: crate::StoreError) -> SourceError {
    SourceError(e.to_string())
}

impl DataSource for StoreSource {
    fn catalog(&self) -> Result<Catalog, SourceError> {
        let probes = schema::probes(&self.client).map_err(err)?;
        let count: u64 = probes.iter().map(|p| p.1).sum();
        let first_ns = probes.iter().map(|p| p.2).min().unwrap_or(0);
        let last_ns = probes.iter().map(|p| p.3).max().unwrap_or(0);
        let interval_ns = probes.iter().map(|p| p.4).max().unwrap_or(1).max(1);
        let levels = if count == 0 {
            Vec::new()
        } else {
            vec![LevelInfo {
                name: ".".into(),
                interval_s: interval_ns.div_ceil(1_000_000_000),
                summaries: count as usize,
                first_ns,
                last_ns,
            }]
        };
        Ok(Catalog {
            source: self.client.url.to_string(),
            probes: probes.into_iter().map(|p| p.0).collect(),
            levels,
            first_ns,
            last_ns,
            problems: Vec::new(),
        })
    }

    fn summaries(
        &self,
        probes: &[String],
        from_ns: u64,
        to_ns: u64,
        _step_ns: u64,
    ) -> Result<Vec<Arc<Summary>>, SourceError> {
        let v = schema::read(&self.client, probes, from_ns, to_ns).map_err(err)?;
        Ok(v.into_iter().map(|s| Arc::new(s.summary)).collect())
    }

    /// The server adds up each bucket's summaries (what crosses the
    /// network is a bucket's sums, not every summary's rows).
    fn bucketed(
        &self,
        probes: &[String],
        from_ns: u64,
        to_ns: u64,
        step_ns: u64,
    ) -> Result<Option<Bucketed>, SourceError> {
        let (v, count) =
            crate::rollup::bucketed(&self.client, probes, from_ns, to_ns, step_ns).map_err(err)?;
        Ok(Some(Bucketed {
            summaries: v.into_iter().map(Arc::new).collect(),
            count,
        }))
    }
}
