//! One Hadoop configuration resource: a `*-site.xml` file.
//!
//! ```xml
//! <configuration>
//!   <property>
//!     <name>yarn.resourcemanager.hostname</name>
//!     <value>rm1</value>
//!     <final>true</final>          <!-- optional -->
//!     <description>…</description> <!-- ignored, as <source> and anything else -->
//!   </property>
//!   <property name="k" value="v" final="true"/>  <!-- attribute form, also accepted -->
//! </configuration>
//! ```
//!
//! The root element must be `<configuration>`. Names are trimmed, values are kept verbatim
//! (the typed getters trim). A property without a name or without a value is skipped, as
//! Hadoop does. `<xi:include>` is refused with [`Error::Unsupported`] rather than silently
//! ignored. DTDs are refused (roxmltree's default), and a file may hold at most
//! [`MAX_NODES`] XML nodes.

use std::path::Path;

use crate::Error;

/// Node limit handed to roxmltree (a big site file has a few thousand).
pub const MAX_NODES: u32 = 1_000_000;

/// One `<property>` as written in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawProperty {
    pub name: String,
    pub value: String,
    pub is_final: bool,
}

/// All text inside `node` (text and CDATA, concatenated), like Java's `getTextContent`.
fn text_of(node: roxmltree::Node<'_, '_>) -> String {
    node.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect()
}

/// Parses the text of a resource; `path` names it in errors.
pub fn parse(path: &Path, text: &str) -> Result<Vec<RawProperty>, Error> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: false,
        nodes_limit: MAX_NODES,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(text, opts).map_err(|source| Error::Xml {
        path: path.to_owned(),
        source,
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "configuration" {
        return Err(Error::NotAConfiguration {
            path: path.to_owned(),
            root: root.tag_name().name().chars().take(64).collect(),
        });
    }
    let mut out = Vec::new();
    for el in root.children().filter(|n| n.is_element()) {
        match el.tag_name().name() {
            "property" => {}
            "include" => {
                return Err(Error::Unsupported {
                    path: path.to_owned(),
                    what: "<xi:include>".into(),
                })
            }
            _ => continue,
        }
        let mut name = el.attribute("name").map(str::to_string);
        let mut value = el.attribute("value").map(str::to_string);
        let mut is_final = el.attribute("final").map(|f| f.trim() == "true");
        for child in el.children().filter(|n| n.is_element()) {
            match child.tag_name().name() {
                "name" => name = Some(text_of(child)),
                "value" => value = Some(text_of(child)),
                "final" => is_final = Some(text_of(child).trim() == "true"),
                _ => {}
            }
        }
        let (Some(name), Some(value)) = (name, value) else {
            continue;
        };
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        out.push(RawProperty {
            name: name.to_string(),
            value,
            is_final: is_final.unwrap_or(false),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Vec<RawProperty>, Error> {
        parse(Path::new("t.xml"), text)
    }

    #[test]
    fn element_and_attribute_forms() {
        let props = p(r#"<?xml version="1.0"?>
<?xml-stylesheet type="text/xsl" href="configuration.xsl"?>
<!-- licence -->
<configuration>
  <property><name> a.b </name><value> spaced </value><description>d</description></property>
  <property><name>c</name><value><![CDATA[x<y]]></value><final>true</final></property>
  <property name="d" value="1" final="true"/>
  <property><name>e</name><value/></property>
  <property><name>novalue</name></property>
  <property><value>noname</value></property>
  <other/>
</configuration>"#)
        .unwrap();
        let got: Vec<(&str, &str, bool)> = props
            .iter()
            .map(|r| (r.name.as_str(), r.value.as_str(), r.is_final))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a.b", " spaced ", false),
                ("c", "x<y", true),
                ("d", "1", true),
                ("e", "", false),
            ]
        );
    }

    #[test]
    fn errors_name_the_file() {
        let e = p("<configuration><property>").unwrap_err();
        assert!(matches!(e, Error::Xml { .. }));
        assert!(e.to_string().contains("t.xml"), "{e}");
        assert!(matches!(p("<conf/>"), Err(Error::NotAConfiguration { .. })));
        assert!(matches!(
            p(
                r#"<configuration xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="x.xml"/></configuration>"#
            ),
            Err(Error::Unsupported { .. })
        ));
        assert!(matches!(
            p(r#"<!DOCTYPE configuration [<!ENTITY a "b">]><configuration/>"#),
            Err(Error::Xml { .. })
        ));
        assert!(matches!(p(""), Err(Error::Xml { .. })));
    }
}
