//! The task store's PostgreSQL connections: a deadpool pool of at most [`POOL_SIZE`], each made
//! when first needed and again after one breaks (an idle one is checked before it is lent); a
//! caller waits at most [`WAIT`] for one. Also what logs and errors may show of a connection
//! URL (not its password) and of a PostgreSQL error, and whether waiting may mend that error.
use std::time::Duration;

use deadpool_postgres::{
    ClientWrapper, Manager, ManagerConfig, Object, RecyclingMethod, Runtime, TimeoutType, Timeouts,
};
use tokio_postgres::NoTls;

use super::pg_tls::MakeRustls;

/// Connections to the database, at most.
pub const POOL_SIZE: usize = 8;
/// Longest wait for a free connection.
pub const WAIT: Duration = Duration::from_secs(5);
/// Longest wait for a new connection (TCP, TLS-less handshake, authentication).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What `url` may show: the scheme, the user, host, port, database and options, but not a
/// password (neither `user:password@` nor a `password=` option). A URL it cannot read is cut
/// down to its scheme rather than shown.
pub fn redact_url(url: &str) -> String {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(a connection string that is not a URL)".into();
    };
    // The user part ends at the last '@' (a password may hold '@', '/' or '?'); what comes
    // before its first ':' is the user, unless it reads as a path or options, when the '@'
    // was not in the address at all and nothing is shown rather than too much.
    let (user, rest) = match rest.rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or_default();
            if user.contains(['/', '?', '=', '&', '#']) {
                return format!("{scheme}://(an address that does not parse)");
            }
            (format!("{user}@"), &rest[at + 1..])
        }
        None => (String::new(), rest),
    };
    let (address, query) = rest.split_once('?').unwrap_or((rest, ""));
    let options: Vec<&str> = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .filter(|kv| {
            let key = kv.split('=').next().unwrap_or_default();
            !key.trim().eq_ignore_ascii_case("password")
        })
        .collect();
    if options.is_empty() {
        format!("{scheme}://{user}{address}")
    } else {
        format!("{scheme}://{user}{address}?{}", options.join("&"))
    }
}

/// What went wrong, in full: the server's own message for an error it sent (tokio-postgres
/// shows those as "db error" alone), else the error and its causes.
pub fn pg_error(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {} ({})", db.severity(), db.message(), db.code().code());
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Whether waiting may mend `e`: a connection lost or refused, a server starting or shutting
/// down, a statement cancelled, a conflict that rolled a transaction back, too many
/// connections may pass; a table or column missing, a permission refused, a read-only or
/// full database, data found corrupted last until someone acts.
pub fn pg_fault(e: &tokio_postgres::Error) -> super::Fault {
    let Some(db) = e.as_db_error() else {
        return super::Fault::Passing;
    };
    let code = db.code().code();
    // Classes 08 connection, 40 rollback, 55 lock not available, 57 operator intervention;
    // 53 insufficient resources but a full disk (53100).
    match code.get(..2) {
        Some("08" | "40" | "55" | "57") => super::Fault::Passing,
        Some("53") if code != "53100" => super::Fault::Passing,
        _ => super::Fault::Lasting,
    }
}

/// Why no connection could be had.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("all {POOL_SIZE} connections stayed busy for {WAIT:?}")]
    Busy,
    #[error("cannot connect within {CONNECT_TIMEOUT:?}")]
    ConnectTimeout,
    #[error("cannot connect: {}", pg_error(.0))]
    Connect(tokio_postgres::Error),
    /// What the pool itself reports (closed, not built); not expected from the pool as built here.
    #[error("the connection pool failed: {0}")]
    Pool(String),
}

impl PoolError {
    /// Whether waiting may mend it (see [`pg_fault`]).
    pub fn fault(&self) -> super::Fault {
        match self {
            PoolError::Connect(e) => pg_fault(e),
            PoolError::Busy | PoolError::ConnectTimeout | PoolError::Pool(_) => {
                super::Fault::Passing
            }
        }
    }
}

impl From<deadpool_postgres::PoolError> for PoolError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        use deadpool_postgres::PoolError as P;
        match e {
            P::Timeout(TimeoutType::Wait) => PoolError::Busy,
            // A recycle that times out drops the connection and makes another; it does not
            // come back as an error, but would be a connection not had in time.
            P::Timeout(TimeoutType::Create | TimeoutType::Recycle) => PoolError::ConnectTimeout,
            P::Backend(e) => PoolError::Connect(e),
            other => PoolError::Pool(other.to_string()),
        }
    }
}

/// A connection lent by the pool. It goes back to the pool only through [`Lent::keep`], once
/// the work on it ended well; dropped otherwise (it failed or was cut off mid-operation, and
/// may be in any state) it is closed and the pool makes another when needed.
pub struct Lent(Option<Object>);

impl Lent {
    /// The connection: a `tokio_postgres::Client` (by `Deref`) whose `prepare_cached` keeps
    /// each statement prepared for the connection's life. The store prepares only its own
    /// constant statements, so each connection's cache holds at most those.
    pub fn conn(&mut self) -> Option<&mut ClientWrapper> {
        self.0.as_deref_mut()
    }

    /// Gives the connection back to the pool for the next caller.
    pub fn keep(mut self) {
        drop(self.0.take());
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            drop(Object::take(conn));
        }
    }
}

pub struct Pool {
    pool: deadpool_postgres::Pool,
    /// Connections go over TLS (the URL said `sslmode=require`).
    tls: bool,
}

impl Pool {
    /// A pool of connections made as `config` says, over TLS with `tls` (see
    /// [`super::pg_tls`]). Connections are made by [`Pool::get`], on the runtime that calls it.
    pub fn new(
        mut config: tokio_postgres::Config,
        tls: Option<MakeRustls>,
    ) -> Result<Self, PoolError> {
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3);
        if config.get_application_name().is_none() {
            config.application_name("droidmesh-gateway");
        }
        // Before an idle connection is lent again it must answer an empty query: one the
        // server closed (restarted, or gone), even before this process has read that it did,
        // is dropped and another made, so the first operation after a restart does not fail.
        // One that breaks mid-operation fails it, and the store tries once more.
        let recycling = ManagerConfig {
            recycling_method: RecyclingMethod::Verified,
        };
        let tls_on = tls.is_some();
        let manager = match tls {
            Some(tls) => Manager::from_config(config, tls, recycling),
            None => Manager::from_config(config, NoTls, recycling),
        };
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .timeouts(Timeouts {
                wait: Some(WAIT),
                // The connection's own timeout (CONNECT_TIMEOUT, naming what it waited for)
                // comes first; this one bounds the rest of the handshake.
                create: Some(CONNECT_TIMEOUT + Duration::from_secs(1)),
                // An idle connection that does not answer its check in time is dropped.
                recycle: Some(CONNECT_TIMEOUT),
            })
            .build()
            .map_err(|e| PoolError::Pool(e.to_string()))?;
        Ok(Self { pool, tls: tls_on })
    }

    /// A connection: an idle one that answers, else a new one.
    pub async fn get(&self) -> Result<Lent, PoolError> {
        Ok(Lent(Some(self.pool.get().await?)))
    }

    /// Whether connections are made over TLS.
    pub fn tls(&self) -> bool {
        self.tls
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn a_url_is_shown_without_its_password() {
        for (url, shown) in [
            (
                "postgres://droidmesh:s3cret@db.example:5432/tasks",
                "postgres://droidmesh@db.example:5432/tasks",
            ),
            (
                "postgresql://droidmesh@db:5432/tasks?sslmode=disable",
                "postgresql://droidmesh@db:5432/tasks?sslmode=disable",
            ),
            // Characters a careless password may hold.
            (
                "postgres://u:p@ss/w?rd@db:5432/tasks",
                "postgres://u@db:5432/tasks",
            ),
            (
                "postgres://u:p:w@db/tasks?application_name=a&password=s3cret&sslmode=prefer",
                "postgres://u@db/tasks?application_name=a&sslmode=prefer",
            ),
            ("postgres://db/tasks?PassWord=s3cret", "postgres://db/tasks"),
            ("postgres://db:5432/tasks", "postgres://db:5432/tasks"),
        ] {
            let got = redact_url(url);
            assert_eq!(got, shown, "{url}");
            assert!(!got.contains("s3cret") && !got.contains("ss/w"), "{got}");
        }
        for odd in [
            "host=db password=s3cret",
            "postgres://db/x?password=s3cret&application_name=a@b",
        ] {
            assert!(!redact_url(odd).contains("s3cret"), "{}", redact_url(odd));
        }
    }
}
