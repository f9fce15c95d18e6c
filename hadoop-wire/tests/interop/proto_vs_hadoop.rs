//! Our `.proto` files against Hadoop's: every message and enum we define in `hadoop-wire/proto/`
//! is compared with the compiled descriptor of the same-named one in the Hadoop 3.5 jars the peer
//! runs (dumped by the peer's `hotpath.peer.DescriptorDump` as a `FileDescriptorSet`).
//!
//! Rules: we may omit whole messages and enums, never a field of a message we define nor a value
//! of an enum we define. For every field: number, name, type (and the referenced type's full
//! name), label, default and `packed` must equal Hadoop's; map entries must stay map entries.
//! Every difference is listed, one per line, as `message.field: what`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hadoop_wire::pb::DESCRIPTOR_SET;
use prost::Message as _;
use prost_reflect::prost_types::{
    field_descriptor_proto::{Label, Type},
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
    FileDescriptorSet,
};

/// Every message and enum of a set, by full name (`hadoop.hdfs.DatanodeInfoProto.AdminState`).
#[derive(Default)]
struct Index<'a> {
    messages: BTreeMap<String, &'a DescriptorProto>,
    enums: BTreeMap<String, &'a EnumDescriptorProto>,
}

impl<'a> Index<'a> {
    fn of(files: impl IntoIterator<Item = &'a FileDescriptorProto>) -> Self {
        let mut ix = Index::default();
        for f in files {
            let scope = f.package().to_string();
            for m in &f.message_type {
                ix.add_message(&scope, m);
            }
            for e in &f.enum_type {
                ix.enums.insert(join(&scope, e.name()), e);
            }
        }
        ix
    }

    fn add_message(&mut self, scope: &str, m: &'a DescriptorProto) {
        let name = join(scope, m.name());
        for n in &m.nested_type {
            self.add_message(&name, n);
        }
        for e in &m.enum_type {
            self.enums.insert(join(&name, e.name()), e);
        }
        self.messages.insert(name, m);
    }
}

fn join(scope: &str, name: &str) -> String {
    if scope.is_empty() {
        name.to_string()
    } else {
        format!("{scope}.{name}")
    }
}

fn type_text(f: &FieldDescriptorProto) -> String {
    let t = Type::try_from(f.r#type.unwrap_or_default())
        .map(|t| t.as_str_name().trim_start_matches("TYPE_").to_lowercase())
        .unwrap_or_else(|_| format!("type#{}", f.r#type.unwrap_or_default()));
    match f.type_name.as_deref() {
        Some(n) if !n.is_empty() => format!("{t} {}", n.trim_start_matches('.')),
        _ => t,
    }
}

fn label_text(f: &FieldDescriptorProto) -> &'static str {
    match f.label() {
        Label::Optional => "optional",
        Label::Required => "required",
        Label::Repeated => "repeated",
    }
}

fn field_text(f: &FieldDescriptorProto) -> String {
    let mut s = format!(
        "{} {} {} = {}",
        label_text(f),
        type_text(f),
        f.name(),
        f.number()
    );
    let mut opts = Vec::new();
    if let Some(d) = &f.default_value {
        opts.push(format!("default = {d:?}"));
    }
    if let Some(p) = f.options.as_ref().and_then(|o| o.packed) {
        opts.push(format!("packed = {p}"));
    }
    if !opts.is_empty() {
        write!(s, " [{}]", opts.join(", ")).unwrap();
    }
    s
}

/// Compares every message and enum of `ours` with the same-named one in `theirs`; one line per
/// difference. Also returns how many messages and enums were compared.
fn compare(ours: &FileDescriptorSet, theirs: &FileDescriptorSet) -> (Vec<String>, usize, usize) {
    let ours = Index::of(&ours.file);
    let theirs = Index::of(&theirs.file);
    let mut diffs = Vec::new();
    for (name, m) in &ours.messages {
        let Some(h) = theirs.messages.get(name) else {
            diffs.push(format!("{name}: message not in Hadoop 3.5"));
            continue;
        };
        let map_entry = |d: &DescriptorProto| d.options.as_ref().and_then(|o| o.map_entry);
        if map_entry(m) != map_entry(h) {
            diffs.push(format!(
                "{name}: map_entry ours {:?}, Hadoop {:?}",
                map_entry(m),
                map_entry(h)
            ));
        }
        let by_number = |d: &'_ DescriptorProto| -> BTreeMap<i32, FieldDescriptorProto> {
            d.field.iter().map(|f| (f.number(), f.clone())).collect()
        };
        let (mine, hadoop) = (by_number(m), by_number(h));
        for (n, hf) in &hadoop {
            match mine.get(n) {
                None => diffs.push(format!(
                    "{name}.{}: missing in ours; Hadoop has `{}`",
                    hf.name(),
                    field_text(hf)
                )),
                Some(of) => {
                    let (a, b) = (field_text(of), field_text(hf));
                    if a != b || of.oneof_index.is_some() != hf.oneof_index.is_some() {
                        diffs.push(format!(
                            "{name}.{}: ours `{a}`, Hadoop `{b}`{}",
                            hf.name(),
                            if of.oneof_index.is_some() != hf.oneof_index.is_some() {
                                " (oneof membership differs)"
                            } else {
                                ""
                            }
                        ));
                    }
                }
            }
        }
        for (n, of) in &mine {
            if !hadoop.contains_key(n) {
                diffs.push(format!(
                    "{name}.{}: not in Hadoop 3.5 (ours `{}`)",
                    of.name(),
                    field_text(of)
                ));
            }
        }
    }
    for (name, e) in &ours.enums {
        let Some(h) = theirs.enums.get(name) else {
            diffs.push(format!("{name}: enum not in Hadoop 3.5"));
            continue;
        };
        let values = |e: &EnumDescriptorProto| -> BTreeMap<String, i32> {
            e.value
                .iter()
                .map(|v| (v.name().to_string(), v.number()))
                .collect()
        };
        let (mine, hadoop) = (values(e), values(h));
        for (v, n) in &hadoop {
            match mine.get(v) {
                None => diffs.push(format!("{name}.{v}: enum value missing in ours (= {n})")),
                Some(m) if m != n => {
                    diffs.push(format!("{name}.{v}: enum value ours = {m}, Hadoop = {n}"))
                }
                Some(_) => {}
            }
        }
        for (v, n) in &mine {
            if !hadoop.contains_key(v) {
                diffs.push(format!(
                    "{name}.{v}: enum value not in Hadoop 3.5 (ours = {n})"
                ));
            }
        }
    }
    (diffs, ours.messages.len(), ours.enums.len())
}

/// Hadoop's outer class of each of our files, from the `java_package` / `java_outer_classname`
/// options our files copy from Hadoop's.
fn outer_classes(ours: &FileDescriptorSet) -> Vec<String> {
    ours.file
        .iter()
        .map(|f| {
            let o = f
                .options
                .as_ref()
                .unwrap_or_else(|| panic!("{}: no options", f.name()));
            format!("{}.{}", o.java_package(), o.java_outer_classname())
        })
        .collect()
}

/// Runs the peer's `DescriptorDump` over the outer classes of our files.
fn hadoop_descriptors(ours: &FileDescriptorSet) -> FileDescriptorSet {
    let build = peer_harness::build::ensure_built().expect("build the Hadoop peer");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("hadoop.fds");
    let res = build
        .java_command("hotpath.peer.DescriptorDump")
        .arg(&out)
        .args(outer_classes(ours))
        .output()
        .expect("run DescriptorDump");
    assert!(
        res.status.success(),
        "DescriptorDump failed ({}):\n{}",
        res.status,
        String::from_utf8_lossy(&res.stderr)
    );
    let bytes = std::fs::read(&out).expect("read the dumped FileDescriptorSet");
    FileDescriptorSet::decode(bytes.as_slice()).expect("decode Hadoop's FileDescriptorSet")
}

/// Our files of Hadoop's packages (`hotpath_protocols.proto`, package `hotpath`, is ours alone).
fn ours() -> FileDescriptorSet {
    let mut set = FileDescriptorSet::decode(DESCRIPTOR_SET).expect("decode our DESCRIPTOR_SET");
    set.file.retain(|f| f.package().starts_with("hadoop."));
    set
}

#[test]
fn every_message_we_define_matches_hadoop_3_5() {
    let ours = ours();
    let theirs = hadoop_descriptors(&ours);
    // every file of ours exists in Hadoop's set under the same name and package
    for f in &ours.file {
        let h = theirs.file.iter().find(|h| h.name() == f.name());
        let h = h.unwrap_or_else(|| panic!("{}: no such file in Hadoop's descriptors", f.name()));
        assert_eq!(h.package(), f.package(), "{}: package", f.name());
    }
    let (diffs, messages, enums) = compare(&ours, &theirs);
    eprintln!("compared {messages} messages and {enums} enums with Hadoop 3.5's");
    // a floor, so that losing a file (or the YARN application protocols) does not pass silently
    assert!(
        messages >= 165 && enums >= 44,
        "{messages} messages, {enums} enums"
    );
    assert!(
        diffs.is_empty(),
        "{} differences between hadoop-wire/proto and Hadoop 3.5 ({messages} messages, {enums} enums compared):\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// The comparison itself finds each kind of difference (so an empty list means something).
#[test]
fn compare_reports_each_kind_of_difference() {
    let theirs = ours();
    let (diffs, ..) = compare(&theirs, &theirs);
    assert_eq!(diffs, Vec::<String>::new());

    let mut ours = theirs.clone();
    let hdfs = ours
        .file
        .iter_mut()
        .find(|f| f.name() == "hdfs.proto")
        .unwrap();
    let info = hdfs
        .message_type
        .iter_mut()
        .find(|m| m.name() == "DatanodeInfoProto")
        .unwrap();
    let at = "hadoop.hdfs.DatanodeInfoProto";
    let removed = info.field.pop().unwrap();
    info.field[0].set_label(Label::Repeated);
    info.field[1].default_value = Some("7".into());
    let state = info
        .enum_type
        .iter_mut()
        .find(|e| e.name() == "AdminState")
        .unwrap();
    state.value[0].number = Some(99);
    let dropped = state.value.pop().unwrap();
    let expect = [
        format!("{at}.{}: missing in ours", removed.name()),
        format!("{at}.{}: ours `repeated", info.field[0].name()),
        format!(
            "{at}.{}: ours `{}`",
            info.field[1].name(),
            field_text(&info.field[1])
        ),
        format!(
            "{at}.AdminState.{}: enum value ours = 99",
            state.value[0].name()
        ),
        format!(
            "{at}.AdminState.{}: enum value missing in ours",
            dropped.name()
        ),
    ];
    let (diffs, ..) = compare(&ours, &theirs);
    let text = diffs.join("\n");
    for e in &expect {
        assert!(text.contains(e.as_str()), "expected {e:?} in:\n{text}");
    }
    assert_eq!(diffs.len(), expect.len(), "{text}");
}
