//! A small, fixed pool of PostgreSQL connections for the task store: at most [`POOL_SIZE`]
//! connections, made when first needed and again after one breaks; a caller waits at most
//! [`WAIT`] for one. Also the one function that turns a connection URL into what logs and
//! errors may show: without its password.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::{Client, NoTls, Statement};

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

impl PoolError {
    /// Whether waiting may mend it (see [`pg_fault`]).
    pub fn fault(&self) -> super::Fault {
        match self {
            PoolError::Connect(e) => pg_fault(e),
            PoolError::Busy | PoolError::ConnectTimeout => super::Fault::Passing,
        }
    }
}

/// One open connection and the statements prepared on it.
pub struct Conn {
    pub client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl Conn {
    /// `sql` prepared on this connection (once; kept for its life).
    pub async fn statement(
        &mut self,
        sql: &'static str,
    ) -> Result<Statement, tokio_postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).await?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }
}

pub struct Pool {
    config: tokio_postgres::Config,
    /// Connections go over TLS (the URL said `sslmode=require`).
    tls: Option<MakeRustls>,
    idle: Mutex<Vec<Conn>>,
    permits: Arc<Semaphore>,
}

/// A connection lent by the pool. It goes back when the lender is dropped, if it was given back
/// with [`Lent::put_back`] after [`Lent::take`] (one that failed or was cut off mid-operation
/// may be in any state and is closed instead).
pub struct Lent<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
    _permit: OwnedSemaphorePermit,
}

impl Lent<'_> {
    pub fn take(&mut self) -> Option<Conn> {
        self.conn.take()
    }

    pub fn put_back(&mut self, conn: Conn) {
        self.conn = Some(conn);
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take().filter(|c| !c.client.is_closed()) {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(conn);
        }
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
}

impl Pool {
    /// A pool of connections made as `config` says, over TLS with `tls` (see
    /// [`super::pg_tls`]).
    pub fn new(mut config: tokio_postgres::Config, tls: Option<MakeRustls>) -> Self {
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3);
        if config.get_application_name().is_none() {
            config.application_name("droidmesh-gateway");
        }
        Self {
            config,
            tls,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(POOL_SIZE)),
        }
    }

    /// A connection: an idle one that is still open, else a new one.
    pub async fn get(&self) -> Result<Lent<'_>, PoolError> {
        let permit = tokio::time::timeout(WAIT, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| PoolError::Busy)?
            .map_err(|_| PoolError::Busy)?;
        loop {
            let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match idle {
                Some(conn) if conn.client.is_closed() => continue,
                Some(conn) => {
                    return Ok(Lent {
                        pool: self,
                        conn: Some(conn),
                        _permit: permit,
                    });
                }
                None => break,
            }
        }
        let client = self.connect().await?;
        Ok(Lent {
            pool: self,
            conn: Some(Conn {
                client,
                statements: HashMap::new(),
            }),
            _permit: permit,
        })
    }

    /// A new connection, its I/O driven by a task of the current runtime until it closes.
    pub async fn connect(&self) -> Result<Client, PoolError> {
        let within = CONNECT_TIMEOUT + Duration::from_secs(1);
        let timed_out = |_| PoolError::ConnectTimeout;
        let client = match &self.tls {
            Some(tls) => {
                let (client, connection) =
                    tokio::time::timeout(within, self.config.connect(tls.clone()))
                        .await
                        .map_err(timed_out)?
                        .map_err(PoolError::Connect)?;
                drive(connection);
                client
            }
            None => {
                let (client, connection) = tokio::time::timeout(within, self.config.connect(NoTls))
                    .await
                    .map_err(timed_out)?
                    .map_err(PoolError::Connect)?;
                drive(connection);
                client
            }
        };
        Ok(client)
    }
}

/// Drives a connection's I/O on a task of its own until it closes.
fn drive(
    connection: impl std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
) {
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "a task store connection closed");
        }
    });
}

impl Pool {
    /// Whether connections are made over TLS.
    pub fn tls(&self) -> bool {
        self.tls.is_some()
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
