//! One HTTP request as the 3.5.0 Fetcher sends it, and the checks of Java's
//! `ShuffleChannelHandler` in its order, up to the map outputs' lookup:
//!
//! | step | condition | answer |
//! |---|---|---|
//! | 1 | method is not GET | 405, empty |
//! | 2 | header `name` ≠ `mapreduce` or `version` ≠ `1.0.0` | 400 `Incompatible shuffle request version` |
//! | 3 | `job`, `map` or `reduce` missing | 400 `Required param job, map and reduce` |
//! | 4 | `job` or `reduce` more than once | 400 `Too many job/reduce parameters` |
//! | 5 | `reduce` not an int | 400 `Bad reduce parameter` |
//! | 6 | job not registered / no `UrlHash` / wrong hash | 401 `Can't find job token for job <job> !!` / `fetcher cannot be authenticated` / `Verification of the hashReply failed` |
//!
//! Then (in [`super::server`]) the map outputs: any one missing or unreadable → 500 for the
//! whole request. Error answers close the connection. A request line over 4096 bytes or
//! headers over 8192 bytes get 400 with an empty body (Netty's `TooLongFrameException`).

/// Netty's `HttpObjectDecoder` default for the request line.
pub const MAX_INITIAL_LINE: usize = 4096;
/// Netty's default for the headers.
pub const MAX_HEADERS: usize = 8192;
/// The most a request may buffer before its end is found.
pub const MAX_REQUEST: usize = MAX_INITIAL_LINE + MAX_HEADERS + 4;

/// A parsed request head (borrowing the connection's buffer).
#[derive(Debug)]
pub struct Head<'a> {
    pub method: &'a str,
    /// The request target as received (`/mapOutput?job=…`).
    pub target: &'a str,
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    /// Bytes of the head, blank line included.
    pub len: usize,
}

impl<'a> Head<'a> {
    /// The last value of a header (names compared case-insensitively, as the JDK and Netty do).
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// Whether the request carries a body (which a shuffle GET never does).
    pub fn has_body(&self) -> bool {
        self.header("transfer-encoding").is_some()
            || self
                .header("content-length")
                .is_some_and(|v| v.trim() != "0")
    }

    /// Whether the client asked to close (`Connection: close`, or HTTP/1.0 without
    /// `keep-alive`).
    pub fn wants_close(&self) -> bool {
        let c = self.header("connection").unwrap_or("");
        if self.version == "HTTP/1.0" {
            !c.eq_ignore_ascii_case("keep-alive")
        } else {
            c.eq_ignore_ascii_case("close")
        }
    }
}

/// What reading a request head gives.
#[derive(Debug)]
pub enum Parse<'a> {
    /// Not complete yet.
    Partial,
    /// A complete head.
    Done(Head<'a>),
    /// Too long or malformed: 400 and close.
    Bad,
}

/// Parses a request head from the start of `buf`.
pub fn parse_head(buf: &[u8]) -> Parse<'_> {
    let Some(end) = find_end(buf) else {
        let line_done = buf.iter().position(|&b| b == b'\n');
        return match line_done {
            None if buf.len() > MAX_INITIAL_LINE => Parse::Bad,
            Some(l) if l > MAX_INITIAL_LINE => Parse::Bad,
            Some(l) if buf.len() - l > MAX_HEADERS => Parse::Bad,
            _ => Parse::Partial,
        };
    };
    let Ok(text) = std::str::from_utf8(&buf[..end.0]) else {
        return Parse::Bad;
    };
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let Some(first) = lines.next() else {
        return Parse::Bad;
    };
    if first.len() > MAX_INITIAL_LINE || end.0 - first.len() > MAX_HEADERS {
        return Parse::Bad;
    }
    let mut parts = first.split(' ').filter(|p| !p.is_empty());
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Parse::Bad;
    };
    if !version.starts_with("HTTP/1.") {
        return Parse::Bad;
    }
    let mut headers = Vec::new();
    for l in lines {
        if l.is_empty() {
            continue;
        }
        let Some((n, v)) = l.split_once(':') else {
            return Parse::Bad;
        };
        headers.push((n.trim(), v.trim()));
        if headers.len() > 256 {
            return Parse::Bad;
        }
    }
    Parse::Done(Head {
        method,
        target,
        version,
        headers,
        len: end.1,
    })
}

/// (end of the head's text, end of the head including the blank line).
fn find_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while let Some(p) = buf[i..].iter().position(|&b| b == b'\n') {
        let nl = i + p;
        // "\n\n" or "\n\r\n"
        if buf.get(nl + 1) == Some(&b'\n') {
            return Some((nl, nl + 2));
        }
        if buf.get(nl + 1) == Some(&b'\r') && buf.get(nl + 2) == Some(&b'\n') {
            return Some((nl, nl + 3));
        }
        i = nl + 1;
    }
    None
}

/// An answer before any map output is looked up: status, reason phrase, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub body: String,
    /// What `/metrics` counts it as.
    pub cause: Cause,
}

/// Failure causes `/metrics` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// 400 or 405: not a shuffle request.
    BadRequest,
    /// 401: unknown job, missing or wrong hash.
    Unauthorized,
    /// 500: a map output missing or unreadable, or a bad id.
    MapOutput,
}

fn refuse(status: u16, body: impl Into<String>, cause: Cause) -> Refusal {
    Refusal {
        status,
        body: body.into(),
        cause,
    }
}

/// A checked shuffle request.
#[derive(Debug)]
pub struct Fetch<'a> {
    pub job: String,
    pub reduce: i32,
    pub maps: Vec<String>,
    pub keep_alive_param: bool,
    /// The `UrlHash` header as received.
    pub url_hash: &'a str,
    pub path: &'a str,
    pub query: &'a str,
}

/// Decodes `%xx` and `+` (Netty's `QueryStringDecoder`); `None` for a bad escape or non-UTF-8.
fn decode_component(s: &str) -> Option<String> {
    if !s.contains(['%', '+']) {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(h, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Java's `Integer.parseInt`: optional sign, ASCII digits, in range.
fn parse_java_int(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Steps 1–5 (see the module docs): the request's parameters, or Java's answer.
pub fn check<'a>(head: &Head<'a>) -> Result<Fetch<'a>, Refusal> {
    if head.method != "GET" {
        return Err(refuse(405, "", Cause::BadRequest));
    }
    if head.header("name") != Some("mapreduce") || head.header("version") != Some("1.0.0") {
        return Err(refuse(
            400,
            "Incompatible shuffle request version",
            Cause::BadRequest,
        ));
    }
    // java.net.URL drops a `#ref`.
    let target = head.target.split('#').next().unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (mut jobs, mut reduces, mut maps, mut keep_alive) = (vec![], vec![], vec![], vec![]);
    for pair in query.split(['&', ';']).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(k), Some(v)) = (decode_component(k), decode_component(v)) else {
            return Err(refuse(400, "", Cause::BadRequest));
        };
        match k.as_str() {
            "job" => jobs.push(v),
            "reduce" => reduces.push(v),
            "map" => maps.push(v),
            "keepAlive" => keep_alive.push(v),
            _ => {}
        }
    }
    if jobs.is_empty() || maps.is_empty() || reduces.is_empty() {
        return Err(refuse(
            400,
            "Required param job, map and reduce",
            Cause::BadRequest,
        ));
    }
    if jobs.len() > 1 || reduces.len() > 1 {
        return Err(refuse(
            400,
            "Too many job/reduce parameters",
            Cause::BadRequest,
        ));
    }
    let Some(reduce) = parse_java_int(&reduces[0]) else {
        return Err(refuse(400, "Bad reduce parameter", Cause::BadRequest));
    };
    // String.split(","): trailing empty strings dropped.
    let mut map_ids = Vec::new();
    for m in &maps {
        let mut parts: Vec<&str> = m.split(',').collect();
        while parts.len() > 1 && parts.last() == Some(&"") {
            parts.pop();
        }
        if parts == [""] {
            parts.clear();
            map_ids.push(String::new());
        }
        map_ids.extend(parts.into_iter().map(String::from));
    }
    let keep_alive_param = keep_alive.len() == 1 && keep_alive[0].eq_ignore_ascii_case("true");
    Ok(Fetch {
        job: jobs.swap_remove(0),
        reduce,
        maps: map_ids,
        keep_alive_param,
        url_hash: head.header("UrlHash").unwrap_or(""),
        path,
        query,
    })
}

/// Step 6: the job is registered and the hash verifies.
pub fn authenticate(
    fetch: &Fetch<'_>,
    secret: Option<&[u8]>,
    has_hash: bool,
    verify: impl FnOnce(&[u8]) -> bool,
) -> Result<(), Refusal> {
    let Some(secret) = secret else {
        return Err(refuse(
            401,
            format!("Can't find job token for job {} !!", fetch.job),
            Cause::Unauthorized,
        ));
    };
    if !has_hash {
        return Err(refuse(
            401,
            "fetcher cannot be authenticated",
            Cause::Unauthorized,
        ));
    }
    if !verify(secret) {
        return Err(refuse(
            401,
            "Verification of the hashReply failed",
            Cause::Unauthorized,
        ));
    }
    Ok(())
}

/// Netty's reason phrases for the statuses the service sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        405 => "Method Not Allowed",
        429 => "TOO MANY REQUESTS",
        500 => "Internal Server Error",
        _ => "Unknown",
    }
}

/// An error answer (Java's `sendError`): text body, `name`/`version`, closes the connection.
pub fn error_response(status: u16, body: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: text/plain; charset=UTF-8\r\nname: mapreduce\r\nversion: 1.0.0\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        reason(status),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// The 429 sent on accept when `mapreduce.shuffle.max.connections` is exceeded.
pub fn too_many_response() -> Vec<u8> {
    b"HTTP/1.1 429 TOO MANY REQUESTS\r\nRetry-After: 1000\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head<'_> {
        match parse_head(text.as_bytes()) {
            Parse::Done(h) => h,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_fetcher_s_request_parses() {
        let req = "GET /mapOutput?job=job_1_0001&reduce=3&map=attempt_1_0001_m_000000_0,attempt_1_0001_m_000001_0 HTTP/1.1\r\nUrlHash: abc=\r\nname: mapreduce\r\nversion: 1.0.0\r\nUser-Agent: Java/17\r\nHost: h:13562\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n";
        let h = head(req);
        assert_eq!(h.len, req.len());
        let f = check(&h).unwrap();
        assert_eq!(f.job, "job_1_0001");
        assert_eq!(f.reduce, 3);
        assert_eq!(f.maps.len(), 2);
        assert_eq!(f.url_hash, "abc=");
        assert_eq!(f.path, "/mapOutput");
        assert!(f.query.starts_with("job=job_1_0001&reduce=3"));
        assert!(!f.keep_alive_param && !h.wants_close());
    }

    #[test]
    fn java_s_order_of_refusals() {
        let ok = "name: mapreduce\r\nversion: 1.0.0\r\n";
        let cases = [
            (format!("POST /mapOutput HTTP/1.1\r\n{ok}\r\n"), 405, ""),
            (
                "GET /mapOutput?job=j&map=m&reduce=1 HTTP/1.1\r\nname: mapreduce\r\n\r\n".into(),
                400,
                "Incompatible shuffle request version",
            ),
            (
                format!("GET /mapOutput?job=j&map=m HTTP/1.1\r\n{ok}\r\n"),
                400,
                "Required param job, map and reduce",
            ),
            (
                format!("GET /mapOutput?job=j&job=k&map=m&reduce=1 HTTP/1.1\r\n{ok}\r\n"),
                400,
                "Too many job/reduce parameters",
            ),
            (
                format!("GET /mapOutput?job=j&map=m&reduce=1-2 HTTP/1.1\r\n{ok}\r\n"),
                400,
                "Bad reduce parameter",
            ),
        ];
        for (req, status, body) in cases {
            let e = check(&head(&req)).unwrap_err();
            assert_eq!((e.status, e.body.as_str()), (status, body), "{req}");
        }
    }

    #[test]
    fn oversized_and_malformed_heads_are_bad() {
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_INITIAL_LINE));
        assert!(matches!(parse_head(long.as_bytes()), Parse::Bad));
        let partial = "a".repeat(MAX_INITIAL_LINE + 1);
        assert!(matches!(parse_head(partial.as_bytes()), Parse::Bad));
        let headers = format!("GET / HTTP/1.1\r\nx: {}\r\n", "b".repeat(MAX_HEADERS));
        assert!(matches!(parse_head(headers.as_bytes()), Parse::Bad));
        assert!(matches!(
            parse_head(b"GET / HTTP/1.1\r\nx: y\r\n"),
            Parse::Partial
        ));
        assert!(matches!(parse_head(b"GET /\r\n\r\n"), Parse::Bad));
        assert!(matches!(parse_head(b"GET / SPDY/3\r\n\r\n"), Parse::Bad));
        assert!(matches!(
            parse_head(b"GET / HTTP/1.1\r\nnocolon\r\n\r\n"),
            Parse::Bad
        ));
        assert!(matches!(parse_head(b"\xff / HTTP/1.1\r\n\r\n"), Parse::Bad));
    }
}
