//! What every command needs: the configuration, the ledger, and the pricing rules per cluster.

use std::collections::HashMap;

use anyhow::Context;
use bursar_ledger::Ledger;
use bursar_pricing::ClusterPricing;

use crate::config::Config;
use crate::prices::Prices;

pub struct App {
    pub config: Config,
    pub ledger: Ledger,
    /// The instance price tables: shipped, config files and the ledger's versions
    /// (`App::prices` for the book in use now).
    pub prices: Prices,
    pub pricing: HashMap<String, ClusterPricing>,
}

impl App {
    /// Validates the configuration, opens (and migrates) the ledger, and applies the accounts
    /// and users the configuration declares. (`bursar config check` prints the warnings.)
    pub async fn open(config: Config) -> anyhow::Result<App> {
        for warning in config.validate()? {
            tracing::debug!("{warning}");
        }
        let pricing = config
            .clusters
            .iter()
            .map(|(name, c)| (name.clone(), c.pricing()))
            .collect();
        let url = config.database_url();
        let ledger = Ledger::open(&url)
            .await
            .with_context(|| format!("cannot open the ledger at {url}"))?;
        let prices = Prices::load(&config, &ledger).await?;
        let app = App {
            config,
            ledger,
            prices,
            pricing,
        };
        app.apply_declarations().await?;
        Ok(app)
    }

    /// Creates or moves the accounts and users the configuration declares. Idempotent; what
    /// exists only in the ledger (accounts created by imports, say) is left alone.
    async fn apply_declarations(&self) -> anyhow::Result<()> {
        // Parents before children: order by depth in the declared tree (validated acyclic).
        let depth = |name: &str| {
            let mut depth = 0;
            let mut cursor = self
                .config
                .accounts
                .get(name)
                .and_then(|a| a.parent.as_deref());
            while let Some(parent) = cursor.filter(|p| *p != "root") {
                depth += 1;
                cursor = self
                    .config
                    .accounts
                    .get(parent)
                    .and_then(|a| a.parent.as_deref());
            }
            depth
        };
        let mut ordered: Vec<&String> = self.config.accounts.keys().collect();
        ordered.sort_by_key(|name| depth(name));
        for name in ordered {
            let parent = self.config.accounts[name]
                .parent
                .as_deref()
                .filter(|p| *p != "root");
            self.ledger
                .ensure_account(name, parent)
                .await
                .with_context(|| format!("account {name}"))?;
            self.ledger
                .set_parent(name, parent)
                .await
                .with_context(|| format!("account {name}"))?;
        }
        for (user, u) in &self.config.users {
            self.ledger
                .upsert_user(user, &u.default_account)
                .await
                .with_context(|| format!("user {user}"))?;
            for account in &u.accounts {
                self.ledger
                    .associate(user, account)
                    .await
                    .with_context(|| format!("user {user}"))?;
            }
        }
        Ok(())
    }

    /// The price book in use now (cheap; take one per batch or request).
    pub fn price_book(&self) -> std::sync::Arc<bursar_pricing::PriceBook> {
        self.prices.book()
    }

    /// Decimal places to show for a currency.
    pub fn decimals(&self, currency: &str) -> u8 {
        self.config.decimals(currency)
    }
}
