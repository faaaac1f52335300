//! One TCP connection to one broker, speaking Kafka's framed request/response protocol with
//! the `kafka-protocol` codec: a 4-byte size, the request header, the body. One request at a
//! time per connection (the admin calls qdeck makes are few and batched); a connection that
//! failed or timed out is dropped and opened again on next use. A new connection is first
//! secured as the profile says (security.rs: TLS, then SASL), within the same timeout, and then
//! asks the broker which API versions it serves (versions.rs picks each request's version).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::security::Security;
use super::versions::Served;
use crate::{BackendError, Result};

/// A byte stream to a broker: plain TCP or TLS over it.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}
pub type Stream = Box<dyn Io>;

/// The largest response qdeck accepts (a Fetch is asked for far less).
const MAX_RESPONSE: usize = 64 << 20;

/// A request qdeck sends and its response. `kafka-protocol`'s own `Request` trait needs its
/// `broker` feature (request decoders, response encoders), which qdeck has no use for.
pub trait Api: Encodable + HeaderVersion {
    const KEY: ApiKey;
    /// The oldest version qdeck fills correctly, where that is older than the version the
    /// caller asks for; `None`: only that version.
    const FLOOR: Option<i16> = None;
    type Response: Decodable + HeaderVersion;
}

macro_rules! apis {
    ($($req:ident => $resp:ident : $key:ident),* $(,)?) => {
        $(impl Api for $req {
            const KEY: ApiKey = ApiKey::$key;
            type Response = $resp;
        })*
    };
}

apis! {
    MetadataRequest => MetadataResponse: Metadata,
    FindCoordinatorRequest => FindCoordinatorResponse: FindCoordinator,
    DescribeGroupsRequest => DescribeGroupsResponse: DescribeGroups,
    ConsumerGroupDescribeRequest => ConsumerGroupDescribeResponse: ConsumerGroupDescribe,
    OffsetFetchRequest => OffsetFetchResponse: OffsetFetch,
    OffsetCommitRequest => OffsetCommitResponse: OffsetCommit,
    ListOffsetsRequest => ListOffsetsResponse: ListOffsets,
    DescribeConfigsRequest => DescribeConfigsResponse: DescribeConfigs,
    FetchRequest => FetchResponse: Fetch,
    ProduceRequest => ProduceResponse: Produce,
    DeleteRecordsRequest => DeleteRecordsResponse: DeleteRecords,
    DeleteGroupsRequest => DeleteGroupsResponse: DeleteGroups,
    ShareGroupDescribeRequest => ShareGroupDescribeResponse: ShareGroupDescribe,
    AlterShareGroupOffsetsRequest => AlterShareGroupOffsetsResponse: AlterShareGroupOffsets,
    SaslHandshakeRequest => SaslHandshakeResponse: SaslHandshake,
    SaslAuthenticateRequest => SaslAuthenticateResponse: SaslAuthenticate,
    ApiVersionsRequest => ApiVersionsResponse: ApiVersions,
}

/// ListGroups asks for nothing version-specific: before v4 a group has no state, before v5 no
/// type, which rows.rs reads as a classic consumer group (no share groups on such a broker).
impl Api for ListGroupsRequest {
    const KEY: ApiKey = ApiKey::ListGroups;
    const FLOOR: Option<i16> = Some(0);
    type Response = ListGroupsResponse;
}

/// The version of ApiVersions qdeck asks with (Kafka 2.4 and later serve it).
const API_VERSIONS_V: i16 = 3;

/// An open, secured connection and what its broker serves (`None`: its ApiVersions answer
/// could not be read, and each request goes at the caller's version as before).
struct Open {
    stream: Stream,
    served: Option<Served>,
}

pub struct Conn {
    addr: String,
    client_id: String,
    timeout: Duration,
    security: Arc<Security>,
    stream: Mutex<Option<Open>>,
    correlation: AtomicI32,
}

impl Conn {
    pub fn new(addr: &str, client_id: &str, timeout: Duration, security: Arc<Security>) -> Conn {
        Conn {
            addr: addr.to_string(),
            client_id: client_id.to_string(),
            timeout,
            security,
            stream: Mutex::new(None),
            correlation: AtomicI32::new(1),
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Send `req` at `version` and read its response, within the timeout.
    pub async fn send<R: Api>(&self, req: &R, version: i16) -> Result<R::Response> {
        let mut guard = self.stream.lock().await;
        let out = tokio::time::timeout(self.timeout, self.exchange(&mut guard, req, version)).await;
        match out {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                // A version the broker does not serve leaves the connection as good as it was.
                if !matches!(e, BackendError::Unsupported(_)) {
                    *guard = None;
                }
                Err(e)
            }
            Err(_) => {
                *guard = None;
                Err(BackendError::Unreachable(format!(
                    "Kafka broker {} did not answer within {}s",
                    self.addr,
                    self.timeout.as_secs_f64()
                )))
            }
        }
    }

    async fn exchange<R: Api>(
        &self,
        slot: &mut Option<Open>,
        req: &R,
        version: i16,
    ) -> Result<R::Response> {
        if slot.is_none() {
            *slot = Some(self.open().await?);
        }
        let Some(open) = slot.as_mut() else {
            return Err(BackendError::Other("connection slot empty".into()));
        };
        let version = match &open.served {
            Some(s) => s.pick(&self.addr, R::KEY, version, R::FLOOR.unwrap_or(version))?,
            None => version,
        };
        self.roundtrip(&mut open.stream, req, version).await
    }

    /// Connect, secure, and ask what the broker serves.
    async fn open(&self) -> Result<Open> {
        let tcp = TcpStream::connect(&self.addr).await.map_err(|e| {
            BackendError::Unreachable(format!("cannot connect to Kafka broker {}: {e}", self.addr))
        })?;
        let _ = tcp.set_nodelay(true);
        let mut stream = self.security.open(&self.addr, tcp).await?;
        if let Some(sasl) = &self.security.sasl {
            super::sasl::authenticate(self, &mut stream, sasl).await?;
        }
        let ask = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("qdeck"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let served = match self.roundtrip(&mut stream, &ask, API_VERSIONS_V).await {
            Ok(resp) if resp.error_code == 0 => Some(Served::from_response(&resp)),
            // A broker older than ApiVersions v3 answers in v0's shape with an error; qdeck's
            // fixed versions then meet the broker's own refusal as before.
            Ok(resp) => {
                tracing::debug!(addr = %self.addr, code = resp.error_code, "ApiVersions refused");
                None
            }
            Err(e @ BackendError::Unreachable(_)) => return Err(e),
            Err(e) => {
                tracing::debug!(addr = %self.addr, error = %e, "ApiVersions unreadable");
                None
            }
        };
        Ok(Open { stream, served })
    }

    /// The versions the broker serves, once a connection is open (tests and diagnostics).
    #[cfg(test)]
    pub async fn served(&self) -> Option<Served> {
        let guard = self.stream.lock().await;
        guard.as_ref().and_then(|o| o.served.clone())
    }

    pub(super) async fn roundtrip<R: Api>(
        &self,
        stream: &mut Stream,
        req: &R,
        version: i16,
    ) -> Result<R::Response> {
        let correlation = self.correlation.fetch_add(1, Ordering::Relaxed);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .map_err(|e| codec("request header", e))?;
        req.encode(&mut body, version)
            .map_err(|e| codec("request", e))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(i32::try_from(body.len()).map_err(|_| codec("request", "too large"))?);
        frame.extend_from_slice(&body);
        let io = |e: std::io::Error| {
            BackendError::Unreachable(format!("Kafka broker {}: {e}", self.addr))
        };
        stream.write_all(&frame).await.map_err(io)?;
        stream.flush().await.map_err(io)?;
        let size = stream.read_i32().await.map_err(io)?;
        // A TLS listener answers plain bytes with a TLS alert or handshake record (0x15 or
        // 0x16, then version 3.x), which reads as a frame size of hundreds of megabytes.
        let [b0, b1, ..] = size.to_be_bytes();
        if (b0 == 0x15 || b0 == 0x16) && b1 == 0x03 {
            return Err(BackendError::Unreachable(format!(
                "Kafka broker {} answered with TLS: this listener is SSL or SASL_SSL; set tls = true (with tls_ca_file for a private CA)",
                self.addr
            )));
        }
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s <= MAX_RESPONSE && *s >= 4)
            .ok_or_else(|| {
                BackendError::Protocol(format!(
                    "Kafka broker {} sent a frame of {size} bytes",
                    self.addr
                ))
            })?;
        let mut buf = vec![0u8; size];
        stream.read_exact(&mut buf).await.map_err(io)?;
        let mut buf = Bytes::from(buf);
        let rh = ResponseHeader::decode(&mut buf, R::Response::header_version(version))
            .map_err(|e| codec("response header", e))?;
        if rh.correlation_id != correlation {
            return Err(BackendError::Protocol(format!(
                "Kafka broker {} answered request {} with {}",
                self.addr, correlation, rh.correlation_id
            )));
        }
        let resp = R::Response::decode(&mut buf, version).map_err(|e| codec("response", e))?;
        if buf.has_remaining() {
            tracing::debug!(addr = %self.addr, left = buf.remaining(), "Kafka response had bytes left");
        }
        Ok(resp)
    }
}

fn codec(what: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::Protocol(format!("Kafka {what}: {e}"))
}
