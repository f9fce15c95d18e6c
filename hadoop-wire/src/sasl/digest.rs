//! DIGEST-MD5 (RFC 2831 as the JDK runs it): client, server, and the auth-int / auth-conf
//! security layers. (Being written.)
