//! Equivalence of the views with prost.
//!
//! proptest generates random prost messages, prost encodes them, and the splicer
//! (`view_support::splice`) re-encodes the bytes with random unknown fields of every wire
//! type (groups included, nested) at every nesting level, random packed/unpacked mixes of
//! repeated scalars and decoy earlier occurrences of singular scalars. Every view accessor
//! must then read exactly what prost decoded from the original message, and `validate()`
//! must accept the bytes. prost decoding the spliced bytes must also give the original
//! message back (a check of the splicer itself).
//!
//! A second family mutates valid encodings at random (byte flips, truncation, insertion):
//! whenever both `validate()` and prost accept the mutated bytes, every accessor must agree
//! with prost, and after a successful `validate()` no accessor may fail except on UTF-8.

use crate::view_support;

use hadoop_wire::pb::hadoop::common as pb_common;
use hadoop_wire::pb::hadoop::hdfs as pb_hdfs;
use hadoop_wire::pb::hadoop::yarn as pb_yarn;
use hadoop_wire::reader::DecodeError;
use hadoop_wire::view::hdfs::*;
use hadoop_wire::view::rpc::*;
use hadoop_wire::view::schema::{validate_generated, validate_table_driven, Schema};
use hadoop_wire::view::yarn::*;
use hadoop_wire::view::MessageView;
use proptest::prelude::*;
use prost::Message;
use view_support::*;

fn spliced<M: Message + Default + PartialEq + std::fmt::Debug>(
    schema: &'static Schema,
    msg: &M,
    seed: u64,
) -> Result<Vec<u8>, TestCaseError> {
    let plain = msg.encode_to_vec();
    let mut rng = SpliceRng::new(seed);
    let bytes = splice(schema, &plain, &mut rng);
    // The splicer must keep the message's meaning for prost too.
    let back = M::decode(&bytes[..]).map_err(|e| TestCaseError::fail(format!("prost: {e}")))?;
    prop_assert_eq!(&back, msg);
    Ok(bytes)
}

/// Runs a property on a thread with a large stack: the nested strategies and comparison
/// functions are deep in debug builds.
fn run_prop<S: Strategy + Send + 'static>(
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError> + Send + 'static,
) where
    S::Value: Send,
{
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let config = ProptestConfig {
                cases,
                failure_persistence: None,
                ..ProptestConfig::default()
            };
            let mut runner = proptest::test_runner::TestRunner::new(config);
            if let Err(e) = runner.run(&strategy, test) {
                panic!("{e}");
            }
        })
        .unwrap()
        .join()
        .unwrap_or_else(|_| panic!("property failed (see above)"));
}

fn validated<'a, V: MessageView<'a>>(bytes: &'a [u8]) -> Result<V, TestCaseError> {
    let v = V::new(bytes);
    v.validate()
        .map_err(|e| TestCaseError::fail(format!("validate: {e}")))?;
    Ok(v)
}

// ---------------------------------------------------------------------------------------
// Mutated encodings.

fn mutate(bytes: &mut Vec<u8>, rng: &mut SpliceRng) {
    for _ in 0..=rng.below(3) {
        if bytes.is_empty() {
            bytes.push(rng.next() as u8);
            continue;
        }
        let i = rng.below(bytes.len() as u64) as usize;
        match rng.below(4) {
            0 => bytes[i] = rng.next() as u8,
            1 => bytes[i] ^= 1 << rng.below(8),
            2 => bytes.truncate(i),
            _ => bytes.insert(i, rng.next() as u8),
        }
    }
}

/// `validate()` and prost must agree except where the views are deliberately stricter
/// (required fields, duplicate non-repeated messages) or deliberately lazier (UTF-8, which
/// the views check on access). Returns prost's message when both accept.
fn agree<M>(
    validate: Result<(), DecodeError>,
    prost: Result<M, prost::DecodeError>,
) -> Result<Option<M>, TestCaseError> {
    match (validate, prost) {
        (Ok(()), Ok(m)) => Ok(Some(m)),
        (Ok(()), Err(e)) => {
            prop_assert!(
                e.to_string().contains("UTF-8"),
                "validate accepted what prost refused: {e}"
            );
            Ok(None)
        }
        (Err(e), Ok(_)) => {
            let stricter = matches!(
                e,
                DecodeError::MissingRequired { .. } | DecodeError::DuplicateMessage { .. }
            );
            prop_assert!(stricter, "validate refused what prost accepted: {}", e);
            Ok(None)
        }
        (Err(_), Err(_)) => Ok(None),
    }
}

/// The generated validator and the table-driven one must accept exactly the same inputs,
/// and `validate()` must report the table-driven result.
fn schema_of<'a, V: MessageView<'a>>(_: &V) -> &'static Schema {
    V::SCHEMA
}

fn validators_agree(schema: &'static Schema, bytes: &[u8]) -> Result<(), TestCaseError> {
    let generated = validate_generated(schema, bytes);
    let table = validate_table_driven(schema, bytes);
    prop_assert_eq!(
        generated,
        table.is_ok(),
        "generated vs table-driven on {:?}: {:?}",
        bytes,
        table
    );
    prop_assert_eq!(hadoop_wire::view::schema::validate(schema, bytes, 0), table);
    Ok(())
}

/// After `validate()` succeeded, an accessor may only fail on UTF-8.
fn only_utf8_errors(errors: &[DecodeError]) -> Result<(), TestCaseError> {
    for e in errors {
        let utf8 = matches!(e, DecodeError::InvalidUtf8 { .. });
        prop_assert!(utf8, "accessor error after validate: {}", e);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Generated messages, spliced.

#[test]
fn heartbeat_plain() {
    run_prop(300, s_heartbeat(), |msg| {
        let bytes = msg.encode_to_vec();
        check_heartbeat(validated(&bytes)?, &msg)
    });
}

#[test]
fn heartbeat_spliced() {
    run_prop(400, (s_heartbeat(), any::<u64>()), |(msg, seed)| {
        let bytes = spliced(
            <NodeHeartbeatRequestView as MessageView>::SCHEMA,
            &msg,
            seed,
        )?;
        check_heartbeat(validated(&bytes)?, &msg)
    });
}

#[test]
fn container_status_spliced() {
    run_prop(1000, (s_container_status(), any::<u64>()), |(msg, seed)| {
        let bytes = spliced(<ContainerStatusView as MessageView>::SCHEMA, &msg, seed)?;
        check_container_status(validated(&bytes)?, &msg)
    });
}

#[test]
fn rpc_request_header_spliced() {
    run_prop(
        1000,
        (s_rpc_request_header(), any::<u64>()),
        |(msg, seed)| {
            let bytes = spliced(<RpcRequestHeaderView as MessageView>::SCHEMA, &msg, seed)?;
            check_rpc_request_header(validated(&bytes)?, &msg)
        },
    );
}

#[test]
fn rpc_response_header_spliced() {
    run_prop(
        1000,
        (s_rpc_response_header(), any::<u64>()),
        |(msg, seed)| {
            let bytes = spliced(<RpcResponseHeaderView as MessageView>::SCHEMA, &msg, seed)?;
            check_rpc_response_header(validated(&bytes)?, &msg)
        },
    );
}

#[test]
fn request_header_spliced() {
    run_prop(1000, (s_request_header(), any::<u64>()), |(msg, seed)| {
        let bytes = spliced(<RequestHeaderView as MessageView>::SCHEMA, &msg, seed)?;
        check_request_header(validated(&bytes)?, &msg)
    });
}

#[test]
fn located_blocks_spliced() {
    run_prop(400, (s_located_blocks(), any::<u64>()), |(msg, seed)| {
        let bytes = spliced(<LocatedBlocksView as MessageView>::SCHEMA, &msg, seed)?;
        check_located_blocks(validated(&bytes)?, &msg)
    });
}

#[test]
fn packet_header_spliced() {
    run_prop(1000, (s_packet_header(), any::<u64>()), |(msg, seed)| {
        let plain = msg.encode_to_vec();
        // Hadoop's fixed sizes: 25 bytes, 27 with syncBlock present.
        prop_assert_eq!(plain.len(), if msg.sync_block.is_some() { 27 } else { 25 });
        let bytes = spliced(<PacketHeaderView as MessageView>::SCHEMA, &msg, seed)?;
        check_packet_header(validated(&bytes)?, &msg)
    });
}

// ---------------------------------------------------------------------------------------
// Mutated encodings.

#[test]
fn heartbeat_mutated() {
    run_prop(1500, (s_heartbeat(), any::<u64>()), |(msg, seed)| {
        LENIENT_ENUMS.with(|l| l.set(true));
        let mut rng = SpliceRng::new(seed);
        let schema = <NodeHeartbeatRequestView as MessageView>::SCHEMA;
        let mut bytes = splice(schema, &msg.encode_to_vec(), &mut rng);
        mutate(&mut bytes, &mut rng);
        let v = NodeHeartbeatRequestView::new(&bytes);
        let mut visit = Visit::new();
        visit.heartbeat(v);
        let validation = v.validate();
        validators_agree(schema_of(&v), &bytes)?;
        if validation.is_ok() {
            only_utf8_errors(&visit.errors)?;
        }
        if let Some(p) = agree(
            validation,
            pb_yarn::NodeHeartbeatRequestProto::decode(&bytes[..]),
        )? {
            check_heartbeat(v, &p)?;
        }
        Ok(())
    });
}

#[test]
fn located_blocks_mutated() {
    run_prop(1500, (s_located_blocks(), any::<u64>()), |(msg, seed)| {
        LENIENT_ENUMS.with(|l| l.set(true));
        let mut rng = SpliceRng::new(seed);
        let schema = <LocatedBlocksView as MessageView>::SCHEMA;
        let mut bytes = splice(schema, &msg.encode_to_vec(), &mut rng);
        mutate(&mut bytes, &mut rng);
        let v = LocatedBlocksView::new(&bytes);
        let mut visit = Visit::new();
        visit.located_blocks(v);
        let validation = v.validate();
        validators_agree(schema_of(&v), &bytes)?;
        if validation.is_ok() {
            only_utf8_errors(&visit.errors)?;
        }
        if let Some(p) = agree(validation, pb_hdfs::LocatedBlocksProto::decode(&bytes[..]))? {
            check_located_blocks(v, &p)?;
        }
        Ok(())
    });
}

#[test]
fn rpc_headers_mutated() {
    let strategy = (
        s_rpc_request_header(),
        s_rpc_response_header(),
        s_request_header(),
        any::<u64>(),
    );
    run_prop(2000, strategy, |(req, resp, rh, seed)| {
        LENIENT_ENUMS.with(|l| l.set(true));
        let mut rng = SpliceRng::new(seed);

        let mut bytes = splice(
            <RpcRequestHeaderView as MessageView>::SCHEMA,
            &req.encode_to_vec(),
            &mut rng,
        );
        mutate(&mut bytes, &mut rng);
        let v = RpcRequestHeaderView::new(&bytes);
        let mut visit = Visit::new();
        visit.rpc_request_header(v);
        let validation = v.validate();
        validators_agree(schema_of(&v), &bytes)?;
        if validation.is_ok() {
            only_utf8_errors(&visit.errors)?;
        }
        if let Some(p) = agree(
            validation,
            pb_common::RpcRequestHeaderProto::decode(&bytes[..]),
        )? {
            check_rpc_request_header(v, &p)?;
        }

        let mut bytes = splice(
            <RpcResponseHeaderView as MessageView>::SCHEMA,
            &resp.encode_to_vec(),
            &mut rng,
        );
        mutate(&mut bytes, &mut rng);
        let v = RpcResponseHeaderView::new(&bytes);
        let mut visit = Visit::new();
        visit.rpc_response_header(v);
        let validation = v.validate();
        validators_agree(schema_of(&v), &bytes)?;
        if validation.is_ok() {
            only_utf8_errors(&visit.errors)?;
        }
        if let Some(p) = agree(
            validation,
            pb_common::RpcResponseHeaderProto::decode(&bytes[..]),
        )? {
            check_rpc_response_header(v, &p)?;
        }

        let mut bytes = splice(
            <RequestHeaderView as MessageView>::SCHEMA,
            &rh.encode_to_vec(),
            &mut rng,
        );
        mutate(&mut bytes, &mut rng);
        let v = RequestHeaderView::new(&bytes);
        let mut visit = Visit::new();
        visit.request_header(v);
        let validation = v.validate();
        validators_agree(schema_of(&v), &bytes)?;
        if validation.is_ok() {
            only_utf8_errors(&visit.errors)?;
        }
        if let Some(p) = agree(
            validation,
            pb_common::RequestHeaderProto::decode(&bytes[..]),
        )? {
            check_request_header(v, &p)?;
        }
        Ok(())
    });
}

#[test]
fn packet_header_mutated() {
    run_prop(2000, (s_packet_header(), any::<u64>()), |(msg, seed)| {
        LENIENT_ENUMS.with(|l| l.set(true));
        let mut rng = SpliceRng::new(seed);
        let mut bytes = splice(
            <PacketHeaderView as MessageView>::SCHEMA,
            &msg.encode_to_vec(),
            &mut rng,
        );
        mutate(&mut bytes, &mut rng);
        let v = PacketHeaderView::new(&bytes);
        let mut visit = Visit::new();
        visit.packet_header(v);
        let validation = v.validate();
        validators_agree(schema_of(&v), &bytes)?;
        if validation.is_ok() {
            only_utf8_errors(&visit.errors)?;
        }
        if let Some(p) = agree(validation, pb_hdfs::PacketHeaderProto::decode(&bytes[..]))? {
            check_packet_header(v, &p)?;
        }
        Ok(())
    });
}
